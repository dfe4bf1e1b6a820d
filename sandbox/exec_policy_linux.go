package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Commands and the policy. Landlock grants rights to whole hierarchies: a
// rule on a directory covers everything beneath it, and rules only add.
// So a command's rights beneath the root are not one rule but as many as
// it takes to leave the policy's paths out, computed from the tree as it
// is when the command starts:
//   - a denied file gets no right at all (its name stays listed, as for
//     the file tools); a denied directory only read-dir, so the names
//     beneath it are listed and no content read;
//   - with --exec-writable, a protected path gets the read rights only,
//     and so does each directory on the way to a path protected literally
//     (Command.Protected), which may not exist yet: it cannot be made;
//   - every other path gets the command's rights; a directory whose whole
//     subtree may have them gets one rule, any other (a directory holding
//     a denied or protected path) only the rights its whole subtree may
//     have, and each of its entries its own rule;
//   - the --rules lines of the command's tool (Command.Lines) deny as
//     --deny does; a path an allow line lets through beneath a directory
//     a later deny line matches gets its own rule, as any entry of a split
//     directory.
//
// Consequences, all on the side of the policy: in a directory that holds
// a protected path (the root, with the default ".git"), a writable
// command can write existing files but create, remove or rename no name,
// since that right would reach the protected path too; a name created in
// such a directory, or in a denied one, is not readable to the command
// that created it. Landlock's refer rule refuses a link or a rename that
// would give a file more rights than it has where it is, so a denied file
// cannot be hard-linked (or renamed) to a readable name, and a symlink
// reaches only what its target's own rules allow.

// policyWalkMax bounds the entries a command's start may walk to apply
// the policy; a larger tree refuses the command rather than run it
// without the policy.
const policyWalkMax = 1 << 20

// errPolicyTree is the refusal of a tree past policyWalkMax.
var errPolicyTree = fmt.Errorf("the root holds more than %d entries: --deny and --protect cannot be applied to a command", policyWalkMax)

// policyNode is one entry of the tree beneath the root.
type policyNode struct {
	abs, rel string
	dir      bool
	dev, ino uint64
	nlink    uint64
	kids     []*policyNode
	// plain: a file with the command's full rights, which needs a rule
	// of its own only when its directory is split.
	plain bool
}

// needsPolicyWalk reports whether commands need the tree walked: the
// policy denies something, or protects something a writable command could
// otherwise change.
func needsPolicyWalk(p *Matcher, writable bool) bool {
	return p != nil && (p.Denies() || (writable && p.Protects()))
}

// rootRules are a command's Landlock rules beneath root under policy p.
// A native command of a writable root may also execute there, but not a
// protected or denied path.
func rootRules(root string, writable, native bool, p *Matcher) ([]landlock.Rule, error) {
	base := landlock.AccessFSSet(commandReadRights)
	if writable {
		base = writeRights(native)
	}
	if !needsPolicyWalk(p, writable) {
		return []landlock.Rule{landlock.PathAccess(base, root)}, nil
	}
	count := 0
	top, err := walkPolicy(root, "", &count)
	if err != nil {
		return nil, err
	}
	// Every name of a denied file is denied: a hard link made before the
	// command started, under a name the policy does not match, is as
	// unreadable as the name it does.
	denied := map[[2]uint64]bool{}
	var mark func(n *policyNode)
	mark = func(n *policyNode) {
		if _, d := p.Denied(n.rel); d && !n.dir {
			denied[[2]uint64{n.dev, n.ino}] = true
		}
		for _, k := range n.kids {
			mark(k)
		}
	}
	mark(top)
	// want is what a path's whole subtree may have: for a file, its own
	// rights and what its directory may do to it (remove, rename).
	want := func(n *policyNode) landlock.AccessFSSet {
		if _, d := p.Denied(n.rel); d || (!n.dir && n.nlink > 1 && denied[[2]uint64{n.dev, n.ino}]) {
			return base &^ (ll.AccessFSReadFile | nativeRights)
		}
		if _, pr := p.Protected(n.rel); pr && writable {
			return commandReadRights
		}
		if n.dir && writable && p.AbovePath(n.rel) {
			// A literal protected path beneath: no name of this
			// directory may be made, removed or renamed, so the path
			// can be neither created nor replaced.
			return commandReadRights
		}
		return base
	}
	var rules []landlock.Rule
	// build returns what all of n's subtree may have, and whether all of
	// it wants exactly what n wants (a --rules allow line beneath a deny
	// line wants more than its directory).
	var build func(n *policyNode) (landlock.AccessFSSet, bool)
	build = func(n *policyNode) (landlock.AccessFSSet, bool) {
		w := want(n)
		if !n.dir {
			if r := w & fileRights; r != 0 && w != base {
				rules = append(rules, landlock.PathAccess(r, n.abs))
			} else if r != 0 {
				n.plain = true
			}
			return w, true
		}
		mark := len(rules)
		least, same := w, true
		for _, k := range n.kids {
			kl, ks := build(k)
			least &= kl
			same = same && ks && kl == w
		}
		if same {
			// The whole subtree wants w: one rule covers it.
			rules = rules[:mark]
			rules = append(rules, landlock.PathAccess(w, n.abs))
			return w, true
		}
		// Split: this directory gets what all of its subtree may have,
		// each entry its own rule.
		for _, k := range n.kids {
			if k.plain {
				rules = append(rules, landlock.PathAccess(base&fileRights, k.abs))
			}
		}
		if least != 0 {
			rules = append(rules, landlock.PathAccess(least, n.abs))
		}
		return least, false
	}
	build(top)
	return rules, nil
}

// fileRights are the rights Landlock accepts on a file.
const fileRights = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
	ll.AccessFSTruncate | ll.AccessFSIoctlDev)

// walkPolicy reads the tree beneath abs, without following symlinks.
// Entries other than directories and regular files get no rule: a symlink
// reaches its target's rules, and fifos, sockets and devices are not
// opened by commands in a directory the policy splits.
func walkPolicy(abs, rel string, count *int) (*policyNode, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil {
		return nil, err
	}
	n := &policyNode{abs: abs, rel: rel, dir: st.Mode&syscall.S_IFMT == syscall.S_IFDIR,
		dev: st.Dev, ino: st.Ino, nlink: uint64(st.Nlink)}
	if !n.dir {
		return n, nil
	}
	ents, err := os.ReadDir(abs)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if *count++; *count > policyWalkMax {
			return nil, errPolicyTree
		}
		t := e.Type()
		if t != 0 && !t.IsDir() {
			continue
		}
		krel := e.Name()
		if rel != "" {
			krel = rel + "/" + e.Name()
		}
		k, err := walkPolicy(filepath.Join(abs, e.Name()), krel, count)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed while walked
		}
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, k)
	}
	return n, nil
}
