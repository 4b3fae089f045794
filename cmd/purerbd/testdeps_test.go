package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBinariesLinkNoTestCode: no binary under cmd/ depends on the
// testing package or on a package whose path says it is for tests
// (radostest, nbdtest, chaostest, vmtest, ...): test machinery lives in
// the developer binary, internal/cmd/purerbd-dev, which the check must
// catch as a control.
func TestBinariesLinkNoTestCode(t *testing.T) {
	if bad := testDeps(t, "../..."); len(bad) > 0 {
		t.Errorf("the binaries under cmd/ link test code: %s", strings.Join(bad, ", "))
	}
	if bad := testDeps(t, "../../internal/cmd/purerbd-dev"); len(bad) == 0 {
		t.Error("the check finds no test code in purerbd-dev, which links it")
	}
}

// testDeps lists the test packages the packages matching pattern import,
// directly or not.
func testDeps(t *testing.T, pattern string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pattern)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pattern, err)
	}
	var bad []string
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		n++
		if isTestPackage(path, std == "true") {
			bad = append(bad, path)
		}
	}
	if n < 50 {
		t.Fatalf("go list -deps %s listed %d packages:\n%s", pattern, n, out)
	}
	return bad
}

// isTestPackage reports whether a package is test machinery: testing,
// the packages below it, and every other package whose path contains
// "test", except the standard library's internal ones that every Go
// program links (os imports internal/testlog, sync internal/synctest).
func isTestPackage(path string, std bool) bool {
	if path == "testing" || strings.HasPrefix(path, "testing/") {
		return true
	}
	if std && (strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/")) {
		return false
	}
	return strings.Contains(path, "test")
}

func TestIsTestPackage(t *testing.T) {
	for path, want := range map[string]bool{
		"testing":           true,
		"testing/iotest":    true,
		"net/http/httptest": true,
		"internal/testlog":  false,
		"internal/synctest": false,
		"github.com/purerbd/purerbd/rados/radostest/cephcluster": true,
		"github.com/purerbd/purerbd/rbd/chaostest":               true,
		"github.com/purerbd/purerbd/nbd/nbdtest":                 true,
		"github.com/stretchr/testify/require":                    true,
		"github.com/purerbd/purerbd/internal/shorttier":          false,
		"github.com/purerbd/purerbd/rados":                       false,
		"os":                                                     false,
	} {
		std := !strings.Contains(path, ".")
		if got := isTestPackage(path, std); got != want {
			t.Errorf("isTestPackage(%q) = %v, want %v", path, got, want)
		}
	}
}
