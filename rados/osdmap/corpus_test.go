package osdmap

import (
	"os/exec"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// needTool returns the path of a Ceph tool the test cannot do without.
func needTool(t testing.TB, name string) string {
	t.Helper()
	shorttier.Skip(t, name)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required for this test (apt-get install ceph-common / ceph-base): %v", name, err)
	}
	return p
}
