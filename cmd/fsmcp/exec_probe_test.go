package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// execProbe is one attempt to get out of the command confinement: the
// script, and what its output must show (each probe prints its own
// verdict, so a probe that silently did nothing cannot pass).
type execProbe struct {
	name   string
	argv   []string
	refute string // must not appear in stdout
	want   string // must appear in stdout or stderr
}

func perlProbe(name, code, want string) execProbe {
	return execProbe{name: name, argv: []string{"perl", "-e", code}, refute: "ESCAPED", want: want}
}

// Every probe tried against the command confinement, each refused by the
// kernel. -v logs each probe's answer.
func TestExecProbes(t *testing.T) {
	root := t.TempDir()
	copyFile(t, "/usr/bin/true", filepath.Join(root, "copied"), 0o755)
	s := start(t, root, "--exec", "/bin/bash", "--exec", "/usr/bin/perl", "--exec", "/usr/bin/cat",
		"--exec-read", "/usr/lib/x86_64-linux-gnu/perl-base", "--exec-writable")
	// x86_64 system call numbers for perl's syscall().
	probes := []execProbe{
		{"read /etc/shadow", []string{"cat", "/etc/shadow"}, "root:", "Permission denied"},
		{"read mountinfo (host paths)", []string{"cat", "/proc/self/mountinfo"}, "/", "Permission denied"},
		{"list /sys", []string{"bash", "-c", "echo /sys/*"}, "/sys/kernel", "/sys/*"},
		{"write /tmp outside scratch", []string{"bash", "-c", "echo x > /tmp/x || echo refused"}, "", "refused"},
		{"dynamic loader on a copied binary", []string{"bash", "-c", "/lib64/ld-linux-x86-64.so.2 ./copied && echo ESCAPED"}, "ESCAPED", "failed to map segment"},
		{"exec a copied binary", []string{"bash", "-c", "./copied && echo ESCAPED"}, "ESCAPED", "Permission denied"},
		{"exec a host binary not granted", []string{"bash", "-c", "/usr/bin/id && echo ESCAPED"}, "ESCAPED", "Permission denied"},
		{"tcp to the loopback", []string{"bash", "-c", "echo x > /dev/tcp/127.0.0.1/22 && echo ESCAPED"}, "ESCAPED", "Operation not permitted"},
		{"udp to the loopback", []string{"bash", "-c", "echo x > /dev/udp/127.0.0.1/53 && echo ESCAPED"}, "ESCAPED", "Operation not permitted"},
		{"signal every process", []string{"bash", "-c", "kill -9 -1; echo survived"}, "", "survived"},
		{"see other processes", []string{"bash", "-c", "echo $$; for p in /proc/[0-9]*; do echo $p; done"}, "/proc/2", "1\n"},
		perlProbe("inet socket", `use Socket; socket(S, AF_INET, SOCK_STREAM, 0) and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("unix socket", `use Socket; socket(S, AF_UNIX, SOCK_STREAM, 0) and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("netlink socket", `use Socket; socket(S, 16, SOCK_RAW, 0) and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("socketpair but unix", `use Socket; socketpair(A, B, AF_INET, SOCK_STREAM, 0) and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("memfd_create", `my $n = "x"; syscall(319, $n, 0) >= 0 and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("new user namespace", `syscall(272, 0x10000000) == 0 and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("ptrace", `syscall(101, 0, 0, 0, 0) == 0 and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("chmod by path", `chmod(0755, "/etc/hostname") and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("symlink out of the root", `symlink("/etc", "etc") and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("io_uring", `my $p = "\0" x 120; syscall(425, 8, $p) >= 0 and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("bpf", `syscall(321, 0, 0, 0) >= 0 and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
		perlProbe("raise the process limit", `my $l = pack("QQ", 100000, 100000); syscall(160, 6, $l) == 0 and print "ESCAPED"; print "$!\n"`, "Operation not permitted"),
	}
	if os.Getenv(nativeRerunEnv) == "1" {
		// --exec-native lets what is in a writable root run
		// (TestExecNative tests both sides).
		probes = slices.DeleteFunc(probes, func(p execProbe) bool { return strings.Contains(p.name, "copied binary") })
	}
	for _, p := range probes {
		r := s.execCall(map[string]any{"argv": p.argv, "timeout_s": 3})
		out := r.str("stdout")
		all := out + r.str("stderr")
		t.Logf("probe %-34s exit=%v signal=%v timed_out=%v stdout=%.80q stderr=%.300q", p.name, r.doc["exit"], r.doc["signal"],
			r.doc["timed_out"], out, r.str("stderr"))
		if p.refute != "" && strings.Contains(out, p.refute) {
			t.Errorf("%s: %q in stdout: %s", p.name, p.refute, r.text)
		}
		if !strings.Contains(all, p.want) {
			t.Errorf("%s: %q not in the output: %s", p.name, p.want, r.text)
		}
	}
	// The server and its confinement survive all of it.
	r := s.execCall(map[string]any{"argv": []string{"bash", "-c", "echo alive"}})
	if r.str("stdout") != "alive\n" {
		t.Fatalf("after the probes: %s", r.text)
	}
	if _, err := os.Stat(filepath.Join(root, "etc")); err == nil {
		t.Error("a symlink was created")
	}
}
