package crush

import (
	"os/exec"
	"testing"
)

// needTool returns the path of a Ceph tool the test cannot do without.
func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required for this test (apt-get install ceph-common / ceph-base): %v", name, err)
	}
	return p
}
