package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e"
)

func init() {
	scenarios = append(scenarios,
		scenario{"snapshot-clone-expand", snapshotCloneExpand},
		scenario{"access-modes", accessModes},
		scenario{"controller-restart-provisioning", controllerRestartProvisioning},
		scenario{"rbac", rbacEnforced},
	)
}

// writeRecords runs a pod that writes the standard records on claim.
func writeRecords(ctx context.Context, t *testing.T, c *e2e.Cluster, pod, claim string, seed int) {
	t.Helper()
	_, err := c.RunPod(ctx, e2e.Pod{Name: pod, Claim: claim, Command: []string{"/bin/workload", "write",
		"--path", "/data/records", "--count", fmt.Sprint(recCount), "--size", fmt.Sprint(recSize), "--seed", fmt.Sprint(seed)}}, 5*time.Minute)
	must(t, err)
	must(t, c.Delete(ctx, "pod/"+pod))
}

// verifyRecords runs a pod that checks them.
func verifyRecords(ctx context.Context, t *testing.T, c *e2e.Cluster, pod, claim string, seed int, readOnly bool) {
	t.Helper()
	_, err := c.RunPod(ctx, e2e.Pod{Name: pod, Claim: claim, ReadOnly: readOnly, Command: []string{"/bin/workload", "verify",
		"--path", "/data/records", "--count", fmt.Sprint(recCount), "--size", fmt.Sprint(recSize), "--seed", fmt.Sprint(seed)}}, 5*time.Minute)
	must(t, err)
	must(t, c.Delete(ctx, "pod/"+pod))
}

// snapshotCloneExpand: a VolumeSnapshot of a written volume, a claim
// restored from it and a claim cloned from the volume read the records;
// the volume grows while a pod has it mounted and the pod sees the new
// size; deleting everything removes every image and snapshot.
func snapshotCloneExpand(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	imagesBefore := poolImages(ctx, t, c)
	must(t, c.Apply(ctx, e2e.PVC{Name: "sn-src", Size: "256Mi"}.Manifest()))
	_, err := c.WaitPVCBound(ctx, "sn-src", 3*time.Minute)
	must(t, err)
	writeRecords(ctx, t, c, "sn-w", "sn-src", 21)

	ts := time.Now()
	must(t, c.Apply(ctx, `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: sn-1}
spec:
  volumeSnapshotClassName: purerbd
  source: {persistentVolumeClaimName: sn-src}
`))
	if _, err := c.Kubectl(ctx, "wait", "--for=jsonpath={.status.readyToUse}=true", "--timeout=3m", "volumesnapshot/sn-1"); err != nil {
		out, _ := c.Kubectl(ctx, "describe", "volumesnapshot/sn-1")
		t.Fatalf("%v\n%s", err, out)
	}
	snapReady := time.Since(ts)
	must(t, c.Apply(ctx, e2e.PVC{Name: "sn-restore", Size: "256Mi", DataSource: "VolumeSnapshot/sn-1"}.Manifest()))
	must(t, c.Apply(ctx, e2e.PVC{Name: "sn-clone", Size: "256Mi", DataSource: "PersistentVolumeClaim/sn-src"}.Manifest()))
	for _, p := range []string{"sn-restore", "sn-clone"} {
		_, err := c.WaitPVCBound(ctx, p, 3*time.Minute)
		must(t, err)
		verifyRecords(ctx, t, c, p+"-v", p, 21, false)
	}

	// online expansion under a running pod
	must(t, c.Apply(ctx, e2e.Pod{Name: "sn-grow", Claim: "sn-src", Command: []string{"/bin/sleep", "3600"}}.Manifest()))
	must(t, c.WaitPodRunning(ctx, "sn-grow", 5*time.Minute))
	sizeBefore := dfKiB(ctx, t, c, "sn-grow")
	te := time.Now()
	_, err = c.Kubectl(ctx, "patch", "pvc", "sn-src", "--type=merge", "-p", `{"spec":{"resources":{"requests":{"storage":"512Mi"}}}}`)
	must(t, err)
	var sizeAfter int64
	for deadline := time.Now().Add(5 * time.Minute); ; {
		sizeAfter = dfKiB(ctx, t, c, "sn-grow")
		if sizeAfter > 400<<10 {
			break
		}
		if time.Now().After(deadline) {
			out, _ := c.Kubectl(ctx, "describe", "pvc/sn-src")
			t.Fatalf("the pod still sees %d KiB five minutes after the claim grew to 512Mi\n%s", sizeAfter, out)
		}
		time.Sleep(2 * time.Second)
	}
	grown := time.Since(te)
	must(t, c.Delete(ctx, "pod/sn-grow"))
	verifyRecords(ctx, t, c, "sn-v2", "sn-src", 21, false)

	must(t, c.Delete(ctx, "pvc/sn-restore", "pvc/sn-clone"))
	must(t, c.Delete(ctx, "volumesnapshot/sn-1"))
	must(t, c.Delete(ctx, "pvc/sn-src"))
	var left []string
	for deadline := time.Now().Add(3 * time.Minute); ; {
		left = newImages(imagesBefore, poolImages(ctx, t, c))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("images left in the pool after every claim and snapshot was deleted: %v", left)
		}
		time.Sleep(2 * time.Second)
	}
	return fmt.Sprintf("snapshot ready in %v; restored and cloned claims read the records; grown online %d → %d KiB seen by the pod in %v; all images removed",
		snapReady.Round(time.Millisecond), sizeBefore, sizeAfter, grown.Round(time.Millisecond))
}

// dfKiB is the size of /data as a pod's df sees it.
func dfKiB(ctx context.Context, t *testing.T, c *e2e.Cluster, pod string) int64 {
	out, err := c.Kubectl(ctx, "exec", pod, "--", "/bin/df", "-k", "/data")
	must(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 2 {
		t.Fatalf("df: %s", out)
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	must(t, err)
	return n
}

// poolImages lists the pool's images.
func poolImages(ctx context.Context, t *testing.T, c *e2e.Cluster) []string {
	out, err := c.Ceph.Rbd(ctx, "ls", "--format", "json", c.Pool)
	must(t, err)
	var names []string
	must(t, json.Unmarshal(out, &names))
	return names
}

func newImages(before, now []string) []string {
	var l []string
	for _, n := range now {
		if !contains(before, n) {
			l = append(l, n)
		}
	}
	return l
}

// accessModes: Kubernetes enforces ReadWriteOncePod (a second pod is
// not scheduled); ReadWriteOnce lets two pods of one node share the
// volume; a ReadOnlyMany claim restored from a snapshot mounts
// read-only: its records read back and a write fails.
func accessModes(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	// RWOP
	must(t, c.Apply(ctx, e2e.PVC{Name: "am-rwop", Size: "64Mi", AccessMode: "ReadWriteOncePod"}.Manifest()))
	_, err := c.WaitPVCBound(ctx, "am-rwop", 3*time.Minute)
	must(t, err)
	for _, p := range []string{"am-rwop-1", "am-rwop-2"} {
		must(t, c.Apply(ctx, e2e.Pod{Name: p, Claim: "am-rwop", Command: []string{"/bin/sleep", "3600"}}.Manifest()))
		if p == "am-rwop-1" {
			must(t, c.WaitPodRunning(ctx, p, 5*time.Minute))
		}
	}
	time.Sleep(15 * time.Second)
	out, err := c.Kubectl(ctx, "get", "pod", "am-rwop-2", "-o", `jsonpath={.status.phase} {.status.conditions[?(@.type=="PodScheduled")].message}`)
	must(t, err)
	if !strings.HasPrefix(string(out), "Pending") || !strings.Contains(string(out), "ReadWriteOncePod") {
		t.Fatalf("a second pod on a ReadWriteOncePod claim: %q (want Pending, unschedulable for ReadWriteOncePod)", out)
	}
	rwop := strings.TrimSpace(string(out))
	must(t, c.Delete(ctx, "pod/am-rwop-2", "pod/am-rwop-1", "pvc/am-rwop"))

	// RWO: two pods on the one node share it
	must(t, c.Apply(ctx, e2e.PVC{Name: "am-rwo", Size: "64Mi"}.Manifest()))
	_, err = c.WaitPVCBound(ctx, "am-rwo", 3*time.Minute)
	must(t, err)
	for _, p := range []string{"am-rwo-1", "am-rwo-2"} {
		must(t, c.Apply(ctx, e2e.Pod{Name: p, Claim: "am-rwo", Command: []string{"/bin/sh", "-c", "echo " + p + " > /data/" + p + " && sync && sleep 3600"}}.Manifest()))
	}
	for _, p := range []string{"am-rwo-1", "am-rwo-2"} {
		must(t, c.WaitPodRunning(ctx, p, 5*time.Minute))
	}
	out, err = c.Kubectl(ctx, "exec", "am-rwo-1", "--", "/bin/cat", "/data/am-rwo-2")
	must(t, err)
	if strings.TrimSpace(string(out)) != "am-rwo-2" {
		t.Fatalf("pod 1 reads pod 2's file as %q", out)
	}
	must(t, c.Delete(ctx, "pod/am-rwo-1", "pod/am-rwo-2", "pvc/am-rwo"))

	// ROX from a snapshot
	must(t, c.Apply(ctx, e2e.PVC{Name: "am-src", Size: "64Mi"}.Manifest()))
	_, err = c.WaitPVCBound(ctx, "am-src", 3*time.Minute)
	must(t, err)
	writeRecords(ctx, t, c, "am-w", "am-src", 31)
	must(t, c.Apply(ctx, `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: am-snap}
spec:
  volumeSnapshotClassName: purerbd
  source: {persistentVolumeClaimName: am-src}
`))
	_, err = c.Kubectl(ctx, "wait", "--for=jsonpath={.status.readyToUse}=true", "--timeout=3m", "volumesnapshot/am-snap")
	must(t, err)
	must(t, c.Apply(ctx, e2e.PVC{Name: "am-rox", Size: "64Mi", AccessMode: "ReadOnlyMany", DataSource: "VolumeSnapshot/am-snap"}.Manifest()))
	_, err = c.WaitPVCBound(ctx, "am-rox", 3*time.Minute)
	must(t, err)
	verifyRecords(ctx, t, c, "am-rox-v", "am-rox", 31, true)
	wout, err := c.RunPod(ctx, e2e.Pod{Name: "am-rox-w", Claim: "am-rox", ReadOnly: true,
		Command: []string{"/bin/sh", "-c", "if touch /data/x 2>/tmp/err; then echo WROTE; else cat /tmp/err; fi"}}, 5*time.Minute)
	must(t, err)
	if !strings.Contains(wout, "Read-only file system") {
		t.Fatalf("a write to the ReadOnlyMany volume: %q (want Read-only file system)", wout)
	}
	must(t, c.Delete(ctx, "pod/am-rox-w", "pvc/am-rox", "volumesnapshot/am-snap", "pvc/am-src"))
	return "RWOP: second pod " + rwop + "; RWO: two pods share the volume; ROX from a snapshot: records read, writes refused (EROFS)"
}

// controllerRestartProvisioning: the controller pod is deleted right
// after a claim is created; the new controller provisions it, and the
// pool holds exactly one new image for it.
func controllerRestartProvisioning(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	before := poolImages(ctx, t, c)
	const n = 3
	var yaml strings.Builder
	for i := 0; i < n; i++ {
		yaml.WriteString(e2e.PVC{Name: fmt.Sprintf("cr-%d", i), Size: "64Mi"}.Manifest())
		yaml.WriteString("---\n")
	}
	must(t, c.Apply(ctx, yaml.String()))
	time.Sleep(500 * time.Millisecond)
	_, err := c.Kubectl(ctx, "-n", "purerbd", "delete", "pod", "-l", "app.kubernetes.io/component=controller", "--wait=false")
	must(t, err)
	var want []string
	for i := 0; i < n; i++ {
		pv, err := c.WaitPVCBound(ctx, fmt.Sprintf("cr-%d", i), 5*time.Minute)
		must(t, err)
		img, err := c.ImageOf(ctx, pv)
		must(t, err)
		want = append(want, img)
	}
	// give a duplicate time to appear
	time.Sleep(10 * time.Second)
	got := newImages(before, poolImages(ctx, t, c))
	if len(got) != n {
		t.Fatalf("after a controller restart during provisioning of %d claims the pool has %d new images %v (claims' images %v)", n, len(got), got, want)
	}
	for _, w := range want {
		if !contains(got, w) {
			t.Fatalf("claim image %s not in the pool's new images %v", w, got)
		}
	}
	for i := 0; i < n; i++ {
		must(t, c.Delete(ctx, fmt.Sprintf("pvc/cr-%d", i)))
	}
	for _, w := range want {
		must(t, waitImageGone(ctx, c, w, 3*time.Minute))
	}
	return fmt.Sprintf("%d claims bound across the restart, %d images, no orphan, no duplicate", n, len(got))
}

// rbacEnforced: the API server enforces RBAC (this cluster runs
// --authorization-mode=Node,RBAC), the sidecars have what they need and
// no more, and nothing binds purerbd's accounts to cluster-admin.
func rbacEnforced(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	ctrl := "system:serviceaccount:purerbd:purerbd-csi-controller"
	node := "system:serviceaccount:purerbd:purerbd-csi-node"
	checks := []struct {
		as, verb, res, sub string
		want               bool
	}{
		{ctrl, "create", "persistentvolumes", "", true},
		{ctrl, "patch", "persistentvolumeclaims", "status", true},
		{ctrl, "update", "persistentvolumeclaims", "status", false},
		{ctrl, "create", "volumesnapshotcontents.snapshot.storage.k8s.io", "", false},
		{ctrl, "update", "volumesnapshotcontents.snapshot.storage.k8s.io", "status", true},
		{ctrl, "delete", "nodes", "", false},
		{ctrl, "get", "secrets", "", true},
		{ctrl, "create", "secrets", "", false},
		{ctrl, "create", "pods", "exec", false},
		{node, "get", "secrets", "", false},
		{node, "list", "pods", "", false},
		{node, "get", "nodes", "", true}, // --domainlabels
		{node, "list", "nodes", "", false},
		{node, "patch", "nodes", "", false},
	}
	var bad []string
	for _, ch := range checks {
		args := []string{"auth", "can-i", ch.verb, ch.res, "--as", ch.as, "-A"}
		if ch.sub != "" {
			args = append(args, "--subresource", ch.sub)
		}
		out, _ := c.Kubectl(ctx, args...)
		got := strings.TrimSpace(string(out)) == "yes"
		if got != ch.want {
			bad = append(bad, fmt.Sprintf("%s %s %s/%s: %v, want %v", ch.as, ch.verb, ch.res, ch.sub, got, ch.want))
		}
	}
	out, err := c.Kubectl(ctx, "get", "clusterrolebindings,rolebindings", "-A", "-o", "json")
	must(t, err)
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
			RoleRef  struct{ Name string } `json:"roleRef"`
			Subjects []struct{ Kind, Name, Namespace string }
		} `json:"items"`
	}
	must(t, json.Unmarshal(out, &list))
	for _, b := range list.Items {
		for _, s := range b.Subjects {
			if s.Namespace == "purerbd" && (b.RoleRef.Name == "cluster-admin" || b.RoleRef.Name == "admin" || b.RoleRef.Name == "edit") {
				bad = append(bad, fmt.Sprintf("binding %s gives %s %s", b.Metadata.Name, s.Name, b.RoleRef.Name))
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("RBAC:\n%s", strings.Join(bad, "\n"))
	}
	return fmt.Sprintf("%d can-i checks as the controller and node accounts hold; no broad role bound", len(checks))
}

func init() {
	scenarios = append([]scenario{{"node-plugin", nodePlugin}}, scenarios...)
}

// nodePlugin: the node plugin, as the DaemonSet runs it (host network),
// drives the kernel's nbd driver through generic netlink with cookies
// and receives its LINK_DEAD notifications, says so in its log, and its
// /healthz on the node's address answers ok.
func nodePlugin(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	logs, err := c.Kubectl(ctx, "-n", "purerbd", "logs", "-l", "app.kubernetes.io/component=node", "--tail=-1")
	must(t, err)
	var line string
	for _, l := range strings.Split(string(logs), "\n") {
		if strings.Contains(l, `msg="nbd kernel interface"`) {
			line = l
		}
	}
	for _, want := range []string{"netns=initial", "netlink=true", "cookies=true", "linkDead=true"} {
		if !strings.Contains(line, want) {
			t.Fatalf("the node plugin's kernel interface line lacks %s: %q", want, line)
		}
	}
	out, err := c.NS.Command(ctx, "wget", "-q", "-O", "-", "http://"+c.NodeIP+":9809/healthz").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok") {
		t.Fatalf("GET /healthz on the node: %v: %q", err, out)
	}
	return "in the host's network namespace: nbd netlink with cookies and LINK_DEAD; /healthz on " + c.NodeIP + ":9809 ok"
}
