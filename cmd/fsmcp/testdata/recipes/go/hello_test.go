package main

import "testing"

func TestGreeting(t *testing.T) {
	if got := greeting("go"); got != "hello, go" {
		t.Fatalf("greeting = %q", got)
	}
}
