package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/nbdtest"
)

// TestDemo runs `purerbd-dev demo --exit-after 20s` as a subprocess: the
// sha256 it prints for purerbd's and librbd's view of demo/disk must
// match. It must say which NBD path it took: KERNEL where this machine
// allows it (root, nbd.ko), and then the /dev/nbdN it names must read the
// same bytes; USERSPACE otherwise, and then nbdinfo and nbdcopy must read
// the export it prints while it runs (nbdcopy's sha256 equal to both). The CSI walk-through must
// report every step OK, `rbd ls` must show no image after the deletes,
// and the admin key (passed as a CSI secret) must never be printed.
// Afterwards the cluster's directory is gone.
func TestDemo(t *testing.T) {
	nbdinfo := nbdtest.RequireTool(t, "nbdinfo", "libnbd-bin")
	nbdcopy := nbdtest.RequireTool(t, "nbdcopy", "libnbd-bin")
	bin := filepath.Join(t.TempDir(), "purerbd-dev")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--exit-after", "20s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		lines              []string
		dir, uri           string
		viaPurerbd, viaLib string
		viaNBD, nbdPath    string
		adminKey           string
		csiOK              = map[string]int{}
		afterDelete        []string
		inAfterDelete      bool
	)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		f := strings.Fields(line)
		if inAfterDelete {
			if strings.HasPrefix(line, "  ") {
				afterDelete = append(afterDelete, strings.TrimSpace(line))
				continue
			}
			inAfterDelete = false
		}
		switch {
		case len(f) == 3 && f[0] == "admin" && f[1] == "keyring":
			adminKey = keyringKey(t, f[2])
		case strings.HasPrefix(line, "  -> ") && strings.Contains(line, ": OK: "):
			step := strings.TrimPrefix(line[:strings.Index(line, ": OK: ")], "  -> ")
			csiOK[step]++
		case strings.HasPrefix(line, "$ rbd ls ") && strings.HasSuffix(line, "(after delete)"):
			inAfterDelete = true
		case len(f) == 2 && f[0] == "directory":
			dir = f[1]
		case strings.HasPrefix(line, "sha256 via purerbd:"):
			viaPurerbd = f[len(f)-1]
		case strings.HasPrefix(line, "sha256 via librbd"):
			viaLib = f[len(f)-1]
		case strings.HasPrefix(line, "NBD path: "):
			nbdPath = f[2]
			for _, w := range f {
				if dev := strings.TrimRight(w, ".,"); strings.HasPrefix(dev, "/dev/nbd") && nbdPath == "KERNEL." && uri == "" {
					// attached through the kernel: read the device while the demo runs
					uri = dev
					if data, err := os.ReadFile(dev); err != nil {
						t.Errorf("reading %s: %v", dev, err)
					} else {
						sum := sha256.Sum256(data)
						viaNBD = hex.EncodeToString(sum[:])
					}
				}
			}
		case len(f) == 1 && strings.HasPrefix(f[0], "nbd+unix://") && uri == "":
			uri = f[0]
			// the export is up: read it while the demo runs
			info, err := exec.CommandContext(ctx, nbdinfo, uri).CombinedOutput()
			if err != nil || !strings.Contains(string(info), "export-size: 268435456") {
				t.Errorf("nbdinfo %s: %v\n%s", uri, err, info)
			}
			out := filepath.Join(t.TempDir(), "disk")
			if b, err := exec.CommandContext(ctx, nbdcopy, uri, out).CombinedOutput(); err != nil {
				t.Errorf("nbdcopy %s: %v\n%s", uri, err, b)
			} else if data, err := os.ReadFile(out); err == nil {
				sum := sha256.Sum256(data)
				viaNBD = hex.EncodeToString(sum[:])
				_ = os.Remove(out)
			}
		}
	}
	err = cmd.Wait()
	output := strings.Join(lines, "\n")
	if err != nil {
		t.Fatalf("purerbd-dev demo: %v\nstdout:\n%s\nstderr:\n%s", err, output, stderr.String())
	}
	if viaPurerbd == "" || viaPurerbd != viaLib {
		t.Fatalf("checksums: purerbd %q, librbd %q\n%s", viaPurerbd, viaLib, output)
	}
	// The kernel path where the machine allows it (root and nbd.ko),
	// the userspace export otherwise; the demo says which.
	wantPath := "USERSPACE."
	if kernelNBDAvailable() {
		wantPath = "KERNEL."
	}
	if nbdPath != wantPath {
		t.Errorf("the demo says NBD path %q; this machine wants %q\n%s", nbdPath, wantPath, output)
	}
	if uri == "" || viaNBD != viaPurerbd {
		t.Fatalf("export %q read by nbdcopy: sha256 %q, want %q\n%s", uri, viaNBD, viaPurerbd, output)
	}
	for step, n := range map[string]int{"identity": 1, "create volume": 1, "create snapshot": 1, "volume from snapshot": 1,
		"volume from volume": 1, "expand": 1, "delete volume": 3, "delete snapshot": 1} {
		if csiOK[step] != n {
			t.Errorf("CSI walk-through: step %q reported OK %d times, want %d", step, csiOK[step], n)
		}
	}
	if len(afterDelete) != 1 || afterDelete[0] != "(no images)" {
		t.Errorf("rbd ls after the CSI deletes shows %q, want no images", afterDelete)
	}
	if !strings.Contains(output, "purerbd demo: CSI walk-through OK") {
		t.Errorf("the CSI walk-through did not finish:\n%s", output)
	}
	if adminKey == "" {
		t.Errorf("no admin key read from the printed keyring")
	} else if strings.Contains(output, adminKey) || strings.Contains(stderr.String(), adminKey) {
		t.Errorf("the admin key was printed")
	}
	if !strings.Contains(output, "stopping every daemon") {
		t.Errorf("demo did not say it stopped its daemons:\n%s", output)
	}
	if dir == "" {
		t.Fatalf("no cluster directory printed:\n%s", output)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still there after the demo (%v)", dir, err)
	}
	t.Logf("NBD path %s sha256 %s (purerbd = librbd = the NBD read of %s)", nbdPath, viaPurerbd, uri)
}

// kernelNBDAvailable says whether this machine lets the demo attach
// through the kernel: root, and nbd.ko loaded or loadable.
func kernelNBDAvailable() bool {
	if os.Geteuid() != 0 {
		return false
	}
	if _, err := os.Stat("/sys/module/nbd"); err == nil {
		return true
	}
	out, err := exec.Command("modprobe", "-n", "nbd").CombinedOutput()
	return err == nil && !strings.Contains(string(out), "not found")
}

// keyringKey reads the key of the first entry of a Ceph keyring.
func keyringKey(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("reading the admin keyring: %v", err)
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.TrimSpace(k) == "key" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
