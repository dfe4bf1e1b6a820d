package sandbox

import "fmt"

// ErrSecondName is the refusal of a writable command while a protected or
// denied file has another name in the root. Landlock grants rights to
// names (each rule is a path), and a hard link is the same inode under
// another name: a write through the unprotected name changes the
// protected file. The kernel cannot protect an inode by one of its names,
// so such a command does not run until one of the names is gone.
type ErrSecondName struct {
	// Path is the protected or denied name, Other the second one, both
	// relative to the root; Why is "protected" or "denied".
	Path, Other, Why string
}

func (e *ErrSecondName) Error() string {
	return fmt.Sprintf("%s is %s by the policy and has a second name in the root, %s: a writable command could change it through that name; remove one of the names", e.Path, e.Why, e.Other)
}

// CheckSecondNames walks the root as a writable command's start would and
// returns an *ErrSecondName for the first protected or denied file with
// another name beneath the root, nil when there is none (or no policy).
// The policy is the command's: --protect and --deny, its tool's --rules
// lines and its literal protected paths (Command.Lines, Command.Protected).
func (l *ExecLayout) CheckSecondNames(lines []RuleLine, protected []string) error {
	p, err := l.Policy.Compile()
	if err != nil {
		return err
	}
	if p = p.WithLines(lines).WithPaths(protected); p.Empty() {
		return nil
	}
	count := 0
	top, err := walkPolicy(ExecRoot, "", &count)
	if err != nil {
		return err
	}
	names := map[[2]uint64][]string{}
	var linked []*policyNode
	var walk func(n *policyNode)
	walk = func(n *policyNode) {
		if !n.dir && n.nlink > 1 {
			k := [2]uint64{n.dev, n.ino}
			names[k] = append(names[k], n.rel)
			linked = append(linked, n)
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(top)
	for _, n := range linked {
		_, protected := p.Protected(n.rel)
		_, denied := p.Denied(n.rel)
		if !protected && !denied {
			continue
		}
		why := "protected"
		if denied {
			why = "denied"
		}
		for _, other := range names[[2]uint64{n.dev, n.ino}] {
			if other != n.rel {
				return &ErrSecondName{Path: n.rel, Other: other, Why: why}
			}
		}
	}
	return nil
}
