package frontend

import (
	"path/filepath"
	"testing"
)

// The state directory's default: systemd's first entry, then an absolute
// $XDG_STATE_HOME, then the home directory's.
func TestDefaultStateDir(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"STATE_DIRECTORY": "/var/lib/fsmcp:/var/lib/other", "XDG_STATE_HOME": "/x"}, "/var/lib/fsmcp"},
		{map[string]string{"XDG_STATE_HOME": "/x"}, "/x/fsmcp"},
		{map[string]string{"XDG_STATE_HOME": "relative"}, filepath.Join("/home/u", ".local", "state", "fsmcp")},
		{map[string]string{}, filepath.Join("/home/u", ".local", "state", "fsmcp")},
	} {
		got, err := defaultStateDir(func(k string) string { return c.env[k] })
		if err != nil || got != c.want {
			t.Errorf("%v: %q, %v; want %q", c.env, got, err, c.want)
		}
	}
}
