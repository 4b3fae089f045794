package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// cephTool runs a Ceph command-line tool the test cannot do without.
func cephTool(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	shorttier.Skip(t, name)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required for this test (Debian: ceph-base / ceph-common): %v", name, err)
	}
	cmd := exec.Command(p, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// purerbd runs the CLI in-process and returns its standard output.
func purerbd(t *testing.T, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("purerbd %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.Bytes()
}

func sameOutput(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			t.Fatalf("%s: line %d:\n got  %q\n want %q", what, i+1, gl[i], wl[i])
		}
	}
	t.Fatalf("%s: %d lines, want %d", what, len(gl), len(wl))
}

func TestCrushTestMatchesCrushtool(t *testing.T) {
	dir := t.TempDir()
	maps := map[string][]string{
		"straw2": {"--build", "--num_osds", "12", "host", "straw2", "3", "rack", "straw2", "2", "root", "straw2", "0"},
		"mixed":  {"--build", "--num_osds", "16", "host", "uniform", "2", "rack", "tree", "2", "row", "list", "2", "root", "straw", "0"},
	}
	for name, build := range maps {
		p := filepath.Join(dir, name)
		cephTool(t, "crushtool", append(build, "-o", p)...)
		cephTool(t, "crushtool", "-i", p, "--create-simple-rule", "ec", "root", "host", "indep", "-o", p)
		for _, args := range [][]string{
			{"--rule", "0", "--num-rep", "3", "--min-x", "0", "--max-x", "9999"},
			{"--rule", "1", "--num-rep", "4", "--min-x", "0", "--max-x", "9999"},
			{"--rule", "0", "--num-rep", "3", "--min-x", "100", "--max-x", "2099", "--pool-id", "5"},
			{"--rule", "1", "--num-rep", "3", "--min-x", "0", "--max-x", "4999", "--weight", "3", "0.5", "--weight", "7", "0"},
			// No --num-rep: every size the rule allows; no --rule: every rule.
			{"--min-x", "0", "--max-x", "299"},
		} {
			test := append([]string{"-i", p, "--test", "--show-mappings"}, args...)
			want := cephTool(t, "crushtool", test...)
			got := purerbd(t, append([]string{"crush", "test"}, test...)...)
			sameOutput(t, name+" "+strings.Join(args, " "), got, want)
		}
	}
}
