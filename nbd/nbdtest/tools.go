package nbdtest

import (
	"os/exec"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// RequireTool returns the path of the program name, or fails the test
// naming the Debian package that provides it. Tests never skip for a
// missing tool: `make deps` installs them (except under -short, whose
// tier runs no external program: see internal/shorttier).
func RequireTool(tb testing.TB, name, debianPackage string) string {
	tb.Helper()
	shorttier.Skip(tb, name)
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s not found (install the Debian package %s): %v", name, debianPackage, err)
	}
	return p
}
