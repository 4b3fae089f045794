package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e"
	"github.com/purerbd/purerbd/deploy/e2e/images"
	"github.com/purerbd/purerbd/internal/shorttier"
)

// TestKubernetes is `make e2e-k8s`: the shipped manifests under a real
// kubelet, every scenario on one cluster. Each scenario prints one line
// "e2e-k8s: NAME: ok FIGURES" (or "FAIL") on standard output.
func TestKubernetes(t *testing.T) {
	shorttier.Skip(t, "root, qemu, Ceph and a Kubernetes build (the Kubernetes e2e run)")
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Minute)
	defer cancel()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	built, err := images.Build(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)), repo, images.DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	var tars []string
	for _, im := range built.Images {
		tars = append(tars, im.Tar)
	}
	report(t, "images", "ok", "built=%d in %v", len(tars), time.Since(t0).Round(time.Second))
	t1 := time.Now()
	c, err := e2e.Start(ctx, t, e2e.Setup{RepoRoot: repo, Images: tars, Log: os.Stdout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("VM console (end):\n%s", c.ConsoleTail(150))
			for _, n := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
				t.Logf("%s log (end):\n%s", n, c.ControlPlaneLog(n))
			}
		}
	})
	ready := fmt.Sprintf("node Ready in %v", time.Since(t1).Round(time.Second))
	if n := c.LockedUpBoots(); n > 0 {
		ready += fmt.Sprintf(", booted %d more time(s) after its kernel locked up", n)
	}
	report(t, "cluster", "ok", "%s", ready)
	t2 := time.Now()
	if err := c.Deploy(ctx, e2e.Addons{SnapshotCRDs: built.SnapshotCRDs, SnapshotController: built.SnapshotController,
		SnapshotMetadataCRD: built.SnapshotMetadataCRD, SnapshotMetadataClientRole: built.SnapshotMetadataClientRole,
		SnapshotMetadataLister: built.SnapshotMetadataLister}); err != nil {
		t.Fatal(err)
	}
	report(t, "deploy", "ok", "manifests applied as deploy/README.md says, plugin registered, in %v", time.Since(t2).Round(time.Second))

	chosen, err := chooseScenarios(append(scenarios, packagingScenarios...), os.Getenv(scenariosEnv))
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range chosen {
		ok := t.Run(sc.name, func(t *testing.T) {
			start := time.Now()
			figures := sc.run(ctx, t, c)
			if !t.Failed() {
				report(t, sc.name, "ok", "%s (%v)", figures, time.Since(start).Round(time.Second))
			}
		})
		if !ok {
			report(t, sc.name, "FAIL", "")
		}
	}
}

// scenariosEnv names the scenarios to run, comma-separated, in the
// order they are defined; unset or empty runs them all (as CI does).
const scenariosEnv = "PURERBD_E2E_SCENARIOS"

// chooseScenarios returns the scenarios list names (all when list is
// empty); a name no scenario has is an error.
func chooseScenarios(all []scenario, list string) ([]scenario, error) {
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	var out []scenario
	var known []string
	for _, sc := range all {
		if want[sc.name] {
			out = append(out, sc)
			delete(want, sc.name)
		}
		known = append(known, sc.name)
	}
	if len(want) > 0 {
		var unknown []string
		for n := range want {
			unknown = append(unknown, n)
		}
		slices.Sort(unknown)
		return nil, fmt.Errorf("%s: no scenario %s (there are: %s)", scenariosEnv, strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return out, nil
}

// report prints a scenario's result line.
func report(t *testing.T, name, status, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("e2e-k8s: %s: %s %s", name, status, fmt.Sprintf(format, args...))
	fmt.Println(line)
	t.Log(line)
}

type scenario struct {
	name string
	run  func(ctx context.Context, t *testing.T, c *e2e.Cluster) string
}

var scenarios = []scenario{
	{"ext4", func(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
		return roundTrip(ctx, t, c, "ext4", 11)
	}},
	{"xfs", func(ctx context.Context, t *testing.T, c *e2e.Cluster) string { return roundTrip(ctx, t, c, "xfs", 12) }},
	{"block", func(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
		return roundTrip(ctx, t, c, "block", 13)
	}},
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// storageClass makes a StorageClass like the example's with another
// file system type (the example's "purerbd" is ext4).
func storageClass(ctx context.Context, t *testing.T, c *e2e.Cluster, fstype string) string {
	t.Helper()
	if fstype == "ext4" {
		return "purerbd"
	}
	b, err := os.ReadFile(filepath.Join(c.RepoRoot, "deploy/kubernetes/example/storageclass.yaml"))
	must(t, err)
	s := strings.Replace(string(b), "name: purerbd\n", "name: purerbd-"+fstype+"\n", 1)
	s = strings.Replace(s, "csi.storage.k8s.io/fstype: ext4", "csi.storage.k8s.io/fstype: "+fstype, 1)
	must(t, c.Apply(ctx, s))
	return "purerbd-" + fstype
}

// records of the round trips: count × size bytes
const (
	recCount = 64
	recSize  = 65536
)

// roundTrip: PVC → pod writes checksummed records → pod deleted → a new
// pod reads them back → the claim deleted; on the way, `rbd export` of
// the image holds the same bytes, and the image is gone after.
func roundTrip(ctx context.Context, t *testing.T, c *e2e.Cluster, kind string, seed int) string {
	name := "rt-" + kind
	size := "256Mi"
	if kind == "xfs" {
		size = "320Mi" // mkfs.xfs makes nothing smaller than 300 MiB
	}
	pvc := e2e.PVC{Name: name, Size: size, Block: kind == "block"}
	if kind != "block" {
		pvc.StorageClass = storageClass(ctx, t, c, kind)
	}
	must(t, c.Apply(ctx, pvc.Manifest()))
	tb := time.Now()
	pv, err := c.WaitPVCBound(ctx, name, 3*time.Minute)
	must(t, err)
	bound := time.Since(tb)
	image, err := c.ImageOf(ctx, pv)
	must(t, err)
	path := "/data/records"
	if kind == "block" {
		path = "/dev/xvda"
	}
	work := []string{"--path", path, "--count", fmt.Sprint(recCount), "--size", fmt.Sprint(recSize), "--seed", fmt.Sprint(seed)}
	tw := time.Now()
	out, err := c.RunPod(ctx, e2e.Pod{Name: name + "-w", Claim: name, Block: kind == "block",
		Command: append([]string{"/bin/workload", "write"}, work...)}, 5*time.Minute)
	must(t, err)
	toWrite := time.Since(tw)
	t.Logf("writer: %s", out)
	must(t, c.Delete(ctx, "pod/"+name+"-w"))
	out, err = c.RunPod(ctx, e2e.Pod{Name: name + "-r", Claim: name, Block: kind == "block",
		Command: []string{"/bin/sh", "-c", "/bin/workload verify " + strings.Join(work, " ") +
			fmt.Sprintf(" && head -c %d %s | sha256sum", recCount*recSize, path)}}, 5*time.Minute)
	must(t, err)
	t.Logf("reader: %s", out)
	podSum := lastField(out)
	must(t, c.Delete(ctx, "pod/"+name+"-r"))

	// the image as Ceph's own tool reads it
	exp := filepath.Join(t.TempDir(), "export")
	_, err = c.Ceph.Rbd(ctx, "export", c.Pool+"/"+image, exp)
	must(t, err)
	hostSum := fileSum(t, kind, exp, path)
	matched := "xfs_repair -n clean"
	if kind != "xfs" {
		if hostSum != podSum {
			t.Fatalf("rbd export of %s: records hash %s, the pod read %s", image, hostSum, podSum)
		}
		matched = "matched rbd export (sha256 " + hostSum[:12] + "…)"
	}

	must(t, c.Delete(ctx, "pvc/"+name))
	must(t, waitImageGone(ctx, c, image, 3*time.Minute))
	return fmt.Sprintf("bound in %v, %d KiB written by a pod that ran %v (stage, mkfs, write, sync), read back by another, %s, image removed",
		bound.Round(time.Millisecond), recCount*recSize>>10, toWrite.Round(time.Millisecond), matched)
}

// fileSum hashes the records in an exported image: the first bytes of a
// block image, the file's contents for a file system (checked first by
// the file system's own checker).
func fileSum(t *testing.T, kind, exp, path string) string {
	t.Helper()
	var data []byte
	switch kind {
	case "block":
		f, err := os.Open(exp)
		must(t, err)
		defer f.Close()
		data = make([]byte, recCount*recSize)
		_, err = f.ReadAt(data, 0)
		must(t, err)
	case "ext4":
		if out, err := exec.Command("e2fsck", "-fn", exp).CombinedOutput(); err != nil {
			t.Fatalf("e2fsck -fn of the export: %v\n%s", err, out)
		}
		out, err := exec.Command("debugfs", "-R", "cat /"+filepath.Base(path), exp).Output()
		must(t, err)
		data = out
	case "xfs":
		if out, err := exec.Command("xfs_repair", "-n", "-f", exp).CombinedOutput(); err != nil {
			t.Fatalf("xfs_repair -n of the export: %v\n%s", err, out)
		}
		// no xfs reader without mounting: the pod's read through the
		// kernel is the check of the contents
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func lastField(s string) string {
	f := strings.Fields(strings.TrimSpace(s))
	for i := len(f) - 1; i >= 0; i-- {
		if len(f[i]) == 64 {
			return f[i]
		}
	}
	return ""
}

// waitImageGone waits until the pool no longer lists image.
func waitImageGone(ctx context.Context, c *e2e.Cluster, image string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		out, err := c.Ceph.Rbd(ctx, "ls", "--format", "json", c.Pool)
		if err == nil {
			var names []string
			if json.Unmarshal(out, &names) == nil && !contains(names, image) {
				return nil
			}
		}
		time.Sleep(2 * time.Second)
	}
	return fmt.Errorf("image %s still in the pool %v after the claim's deletion", image, limit)
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
