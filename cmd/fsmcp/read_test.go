package main

import (
	"strings"
	"testing"
)

func TestStatRootConfinement(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	for _, p := range []string{"", ".", "/", "sub/.."} {
		r := s.wantOK("fs_stat", map[string]any{"path": p})
		c, ok := r.doc["confinement"].(map[string]any)
		if !ok {
			t.Fatalf("fs_stat(%q) has no confinement: %s", p, r.text)
		}
		abi, _ := c["landlock_abi"].(float64)
		if abi < 1 || c["network_denied"] != (abi >= 4) || c["read_only_enforced"] != false ||
			!strings.HasPrefix(c["rg_version"].(string), "ripgrep ") {
			t.Errorf("fs_stat(%q).confinement = %v", p, c)
		}
		noHostPath(t, r.text, root)
	}
}
