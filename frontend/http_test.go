package frontend

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr        string
		allowRemote bool
		wantErr     bool
	}{
		{"127.0.0.1:8080", false, false},
		{"127.8.9.10:0", false, false},
		{"[::1]:8080", false, false},
		{"localhost:8080", false, false},
		{"LOCALHOST:1", false, false},
		{"0.0.0.0:8080", false, true},
		{":8080", false, true},
		{"[::]:8080", false, true},
		{"192.0.2.1:8080", false, true},
		{"[::ffff:127.0.0.1]:8080", false, false},
		{"example.com:8080", false, true},
		{"0.0.0.0:8080", true, false},
		{"127.0.0.1", false, true},
	} {
		err := checkListen(c.addr, c.allowRemote)
		if (err != nil) != c.wantErr {
			t.Errorf("checkListen(%q, %v) = %v, want error %v", c.addr, c.allowRemote, err, c.wantErr)
		}
	}
}

func TestOriginAllowed(t *testing.T) {
	allow := []string{"https://app.example:8443"}
	for _, c := range []struct {
		values []string
		want   bool
	}{
		{nil, true},
		{[]string{"http://localhost"}, true},
		{[]string{"http://localhost:3000"}, true},
		{[]string{"https://127.0.0.1:1"}, true},
		{[]string{"http://[::1]"}, true},
		{[]string{"HTTPS://APP.EXAMPLE:8443"}, true},
		{[]string{"https://app.example:8443/"}, true},
		{[]string{"https://app.example"}, false},
		{[]string{"http://app.example:8443"}, false},
		{[]string{"http://localhost.evil.example"}, false},
		{[]string{"http://127.0.0.1.evil.example"}, false},
		{[]string{"null"}, false},
		{[]string{""}, false},
		{[]string{"chrome-extension://abc"}, false},
		{[]string{"http://localhost", "http://evil.example"}, false},
		{[]string{"http://user@localhost"}, false},
	} {
		if got := originAllowed(c.values, allow); got != c.want {
			t.Errorf("originAllowed(%q) = %v, want %v", c.values, got, c.want)
		}
	}
}

func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://App.Example":      "https://app.example",
		"http://h:8080/":           "http://h:8080",
		"ftp://h":                  "",
		"https://h/path":           "",
		"https://h?q":              "",
		"h:8080":                   "",
		"https://":                 "",
		"https://u:p@h.example":    "",
		"https://h.example#anchor": "",
	} {
		got, err := parseOrigin(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("parseOrigin(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
}

func TestAuthorized(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("  s3cret-token-of-some-length \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	token, generated, err := loadToken(tokenFile, &warn)
	if err != nil || generated || token != "s3cret-token-of-some-length" {
		t.Fatalf("loadToken = %q, %v, %v", token, generated, err)
	}
	if !strings.Contains(warn.String(), "readable by other users") {
		t.Errorf("no warning for a world-readable token file: %q", warn.String())
	}
	h := &httpEndpoint{}
	copy(h.tokenSum[:], sha256Sum(token))
	for _, c := range []struct {
		values []string
		want   bool
	}{
		{[]string{"Bearer s3cret-token-of-some-length"}, true},
		{[]string{"BEARER s3cret-token-of-some-length"}, true},
		{[]string{"Bearer s3cret-token-of-some-lengt"}, false},
		{[]string{"Bearer s3cret-token-of-some-length-"}, false},
		{[]string{"Bearers3cret-token-of-some-length"}, false},
		{[]string{"Basic s3cret-token-of-some-length"}, false},
		{[]string{"Bearer s3cret-token-of-some-length", "Bearer x"}, false},
		{nil, false},
	} {
		r := &http.Request{Header: http.Header{}}
		for _, v := range c.values {
			r.Header.Add("Authorization", v)
		}
		if _, got := h.authorized(r); got != c.want {
			t.Errorf("authorized(%q) = %v, want %v", c.values, got, c.want)
		}
	}
}

func TestLoadTokenRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"short":     "abc\n",
		"two-lines": "aaaaaaaaaaaaaaaa\nbbbbbbbbbbbbbbbb\n",
		"space":     "aaaaaaaa bbbbbbbbbbbb",
		"empty":     "",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if tok, _, err := loadToken(p, &bytes.Buffer{}); err == nil {
			t.Errorf("loadToken(%s) = %q, want an error", name, tok)
		}
	}
	if _, _, err := loadToken(filepath.Join(dir, "missing"), &bytes.Buffer{}); err == nil {
		t.Error("loadToken(missing) succeeded")
	}
	a, gen, err := loadToken("", &bytes.Buffer{})
	b, _, _ := loadToken("", &bytes.Buffer{})
	if err != nil || !gen || len(a) < 43 || a == b {
		t.Errorf("generated tokens %q, %q, %v", a, b, err)
	}
}
