package nbd_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/internal/shorttier"
	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// python finds a Python 3 that can import libnbd's binding.
func python(t *testing.T) string {
	t.Helper()
	shorttier.Skip(t, "python3-libnbd")
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil {
			if exec.Command(path, "-c", "import nbd; nbd.NBD()").Run() == nil {
				return path
			}
		}
	}
	t.Fatal("no python3 can import nbd (install the Debian package python3-libnbd)")
	return ""
}

func TestLibnbdEdgeCases(t *testing.T) {
	py := python(t)
	const size = 16 << 20
	srv, _ := nbdtest.StartMemory(t, "disk", size)
	out := run(t, py, "testdata/libnbd_edges.py", srv.Socket, "disk", strconv.Itoa(size))
	if !strings.Contains(out, "ALL OK") {
		t.Fatalf("libnbd_edges.py:\n%s", out)
	}
	t.Logf("%d checks passed", strings.Count(out, "OK "))
}
