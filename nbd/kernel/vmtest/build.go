package vmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildGo builds the Go main package pkg (an import path, or a directory
// relative to the test's package) as a static binary, with cgo off, and
// returns its path in a temporary directory of tb.
func BuildGo(tb testing.TB, pkg string) string {
	tb.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		tb.Fatalf("go command not found to build %s for the guest: %v", pkg, err)
	}
	out := filepath.Join(tb.TempDir(), filepath.Base(pkg))
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	if !isStatic(out) {
		tb.Fatalf("build %s: the binary is not static", pkg)
	}
	return out
}
