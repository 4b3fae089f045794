package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMultiCallArgs(t *testing.T) {
	for _, c := range []struct {
		argv0 string
		args  []string
		want  []string
	}{
		{"/usr/bin/purerbd", []string{"rbd", "ls"}, []string{"rbd", "ls"}},
		{"/usr/local/bin/rbd", []string{"ls", "-l", "pool"}, []string{"rbd", "ls", "-l", "pool"}},
		{"rados", []string{"-p", "rbd", "ls"}, []string{"rados", "-p", "rbd", "ls"}},
		{"./rbd-nbd", []string{"map", "pool/img"}, []string{"rbd-nbd", "map", "pool/img"}},
		{"rbd-nbd", []string{"--id", "admin", "unmap", "/dev/nbd0"}, []string{"rbd-nbd", "--id", "admin", "unmap", "/dev/nbd0"}},
		{"rbd-nbd", []string{"list-mapped"}, []string{"rbd-nbd", "list-mapped"}},
		{"purerbd-old", []string{"version"}, []string{"version"}},
	} {
		if got := multiCallArgs(c.argv0, c.args); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: %q, want %q", c.argv0, c.args, got, c.want)
		}
	}
}

// TestMultiCallBinary runs the built binary through symlinks named as
// Ceph's tools: each answers as that group (its help names its verbs).
func TestMultiCallBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "purerbd")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	for name, want := range map[string]string{"rbd": "snap", "rados": "setomapval", "rbd-nbd": "list-mapped"} {
		link := filepath.Join(dir, name)
		if err := os.Symlink(bin, link); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd := exec.CommandContext(context.Background(), link, "--help")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s --help: %v: %s", name, err, out.String())
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("%s --help does not list %q:\n%s", name, want, out.String())
		}
	}
}
