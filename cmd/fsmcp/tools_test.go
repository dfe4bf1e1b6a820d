package main

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"
)

// annotations of the contract: read-only, destructive, idempotent.
var wantAnnotations = map[string][3]bool{
	"fs_stat":      {true, false, true},
	"fs_list":      {true, false, true},
	"fs_read":      {true, false, true},
	"fs_glob":      {true, false, true},
	"fs_grep":      {true, false, true},
	"fs_write":     {false, true, false},
	"fs_replace":   {false, true, false},
	"fs_mkdir":     {false, false, true},
	"fs_move":      {false, true, false},
	"fs_delete":    {false, true, false},
	"fs_splice":    {false, true, false},
	"fs_patch":     {false, true, false},
	"fs_copy":      {false, false, false},
	"fs_digest":    {true, false, true},
	"fs_tree":      {true, false, true},
	"fs_view":      {true, false, true},
	"fs_read_many": {true, false, true},
}

func listTools(t *testing.T, s *server) map[string][3]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][3]bool{}
	for _, tool := range res.Tools {
		a := tool.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s: annotations %+v, want all hints set and openWorldHint false", tool.Name, a)
			continue
		}
		got[tool.Name] = [3]bool{a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint}
	}
	return got
}

// Every tool carries the contract's annotations; the server offers all
// ten tools.
func TestToolAnnotations(t *testing.T) {
	root, _ := tree(t)
	got := listTools(t, start(t, root))
	if fmt.Sprint(got) != fmt.Sprint(wantAnnotations) {
		t.Errorf("tools/list = %v\nwant %v", got, wantAnnotations)
	}
}

// --read-only registers exactly the read tools.
func TestReadOnlyListsReadTools(t *testing.T) {
	root, _ := tree(t)
	got := listTools(t, start(t, root, "--read-only"))
	var names []string
	for name, a := range got {
		names = append(names, name)
		if a != wantAnnotations[name] {
			t.Errorf("%s annotations %v, want %v", name, a, wantAnnotations[name])
		}
	}
	sort.Strings(names)
	if want := "[fs_digest fs_glob fs_grep fs_list fs_read fs_read_many fs_stat fs_tree fs_view]"; fmt.Sprint(names) != want {
		t.Errorf("--read-only tools/list = %v, want %s", names, want)
	}
}
