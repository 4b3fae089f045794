package e2e_test

import (
	"bytes"
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
		scenario{"group-snapshot", groupSnapshot},
		scenario{"qos-vac", qosVolumeAttributesClass},
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
	waitReadyToUse(ctx, t, c, "volumesnapshot/sn-1")
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

// waitReadyToUse waits until a (group) snapshot is ready to use; when it
// is not, the failure shows the object and the end of csi-snapshotter's
// log.
func waitReadyToUse(ctx context.Context, t *testing.T, c *e2e.Cluster, obj string) {
	t.Helper()
	if _, err := c.Kubectl(ctx, "wait", "--for=jsonpath={.status.readyToUse}=true", "--timeout=3m", obj); err != nil {
		out, _ := c.Kubectl(ctx, "describe", obj)
		logs, _ := c.Kubectl(ctx, "-n", "purerbd", "logs", "-l", "app.kubernetes.io/component=controller", "-c", "csi-snapshotter", "--tail=40")
		t.Fatalf("%v\n%s\n--- csi-snapshotter:\n%s", err, out, logs)
	}
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
	waitReadyToUse(ctx, t, c, "volumesnapshot/am-snap")
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
		{ctrl, "update", "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io", "status", true},
		{ctrl, "create", "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io", "", false},
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

// groupSnapshot: two claims with a common label, each written by a pod
// that keeps it mounted; a VolumeGroupSnapshot selecting them by label
// becomes ready, and Ceph holds one RBD group with one complete group
// snapshot; each member VolumeSnapshot the snapshot-controller made is
// restored into a new claim whose pod reads that claim's records back;
// deleting everything leaves no new image and no group in the pool.
func groupSnapshot(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	imagesBefore, groupsBefore := poolImages(ctx, t, c), poolGroups(ctx, t, c)
	seeds := map[string]int{"gs-a": 51, "gs-b": 52}
	claims := []string{"gs-a", "gs-b"}
	var yaml strings.Builder
	for _, cl := range claims {
		yaml.WriteString(e2e.PVC{Name: cl, Size: "64Mi", Labels: map[string]string{"e2e-group": "gs"}}.Manifest())
		yaml.WriteString("---\n")
	}
	must(t, c.Apply(ctx, yaml.String()))
	for _, cl := range claims {
		_, err := c.WaitPVCBound(ctx, cl, 3*time.Minute)
		must(t, err)
		// the writer stays up: the group snapshot is cut under mounted
		// volumes, their exclusive locks held by the node
		must(t, c.Apply(ctx, e2e.Pod{Name: cl + "-w", Claim: cl, Command: []string{"/bin/sh", "-c",
			fmt.Sprintf("/bin/workload write --path /data/records --count %d --size %d --seed %d && sync && exec sleep 3600", recCount, recSize, seeds[cl])}}.Manifest()))
	}
	for _, cl := range claims {
		must(t, c.WaitPodRunning(ctx, cl+"-w", 5*time.Minute))
		waitLog(ctx, t, c, cl+"-w", `"ok":true`, 3*time.Minute)
	}

	ts := time.Now()
	must(t, c.Apply(ctx, `apiVersion: groupsnapshot.storage.k8s.io/v1
kind: VolumeGroupSnapshot
metadata: {name: gs-1}
spec: {volumeGroupSnapshotClassName: purerbd, source: {selector: {matchLabels: {e2e-group: gs}}}}
`))
	waitReadyToUse(ctx, t, c, "volumegroupsnapshot/gs-1")
	ready := time.Since(ts)

	// Ceph's view: one new group carrying one complete group snapshot
	// whose members are the two claims' images
	groups := newImages(groupsBefore, poolGroups(ctx, t, c))
	if len(groups) != 1 {
		t.Fatalf("the pool has new RBD groups %v after one VolumeGroupSnapshot, want one", groups)
	}
	out, err := c.Ceph.Rbd(ctx, "group", "snap", "ls", "--format", "json", c.Pool+"/"+groups[0])
	must(t, err)
	var gsnaps []struct {
		Snapshot string `json:"snapshot"`
		State    string `json:"state"`
	}
	must(t, json.Unmarshal(out, &gsnaps))
	// Pacific's and Reef's rbd say "ok" of a complete group snapshot,
	// Tentacle's "complete"
	if len(gsnaps) != 1 || (gsnaps[0].State != "ok" && gsnaps[0].State != "complete") {
		t.Fatalf("rbd group snap ls %s: %s (want one complete group snapshot)", groups[0], out)
	}
	for _, cl := range claims {
		pv, err := c.Kubectl(ctx, "get", "pvc", cl, "-o", "jsonpath={.spec.volumeName}")
		must(t, err)
		img, err := c.ImageOf(ctx, strings.TrimSpace(string(pv)))
		must(t, err)
		out, err := c.Ceph.Rbd(ctx, "snap", "ls", "--all", "--format", "json", c.Pool+"/"+img)
		must(t, err)
		var snaps []struct {
			Namespace struct {
				Type string `json:"type"`
			} `json:"namespace"`
		}
		must(t, json.Unmarshal(out, &snaps))
		if len(snaps) != 1 || snaps[0].Namespace.Type != "group" {
			t.Fatalf("rbd snap ls --all %s (claim %s): %s (want one snapshot in the group namespace)", img, cl, out)
		}
	}

	// the member VolumeSnapshots, restored
	var members map[string]string
	for deadline := time.Now().Add(time.Minute); ; {
		if members = groupMembers(ctx, t, c, "gs-1"); len(members) == len(claims) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("VolumeGroupSnapshot gs-1 has member VolumeSnapshots %v, want one of each of %v", members, claims)
		}
		time.Sleep(2 * time.Second)
	}
	// both restored and read at once: a pod's start is most of the time
	for _, cl := range claims {
		snap, ok := members[cl]
		if !ok {
			t.Fatalf("no member VolumeSnapshot of claim %s in %v", cl, members)
		}
		must(t, c.Apply(ctx, e2e.PVC{Name: cl + "-restore", Size: "64Mi", DataSource: "VolumeSnapshot/" + snap}.Manifest()))
	}
	errs := make(chan error, len(claims))
	for _, cl := range claims {
		go func() {
			r := cl + "-restore"
			if _, err := c.WaitPVCBound(ctx, r, 3*time.Minute); err != nil {
				errs <- err
				return
			}
			_, err := c.RunPod(ctx, e2e.Pod{Name: r + "-v", Claim: r, Command: []string{"/bin/workload", "verify",
				"--path", "/data/records", "--count", fmt.Sprint(recCount), "--size", fmt.Sprint(recSize), "--seed", fmt.Sprint(seeds[cl])}}, 5*time.Minute)
			errs <- err
		}()
	}
	for range claims {
		must(t, <-errs)
	}

	// everything out: restores, writers, the group snapshot (its members
	// with it), the claims
	must(t, c.Delete(ctx, "pod/gs-a-restore-v", "pod/gs-b-restore-v", "pvc/gs-a-restore", "pvc/gs-b-restore", "pod/gs-a-w", "pod/gs-b-w"))
	must(t, c.Delete(ctx, "volumegroupsnapshot/gs-1"))
	must(t, c.Delete(ctx, "pvc/gs-a", "pvc/gs-b"))
	var leftImages, leftGroups []string
	for deadline := time.Now().Add(3 * time.Minute); ; {
		leftImages = newImages(imagesBefore, poolImages(ctx, t, c))
		leftGroups = newImages(groupsBefore, poolGroups(ctx, t, c))
		if len(leftImages) == 0 && len(leftGroups) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left in the pool after the claims and the group snapshot were deleted: images %v, groups %v", leftImages, leftGroups)
		}
		time.Sleep(2 * time.Second)
	}
	return fmt.Sprintf("group snapshot of 2 mounted claims ready in %v: RBD group %s, 1 complete group snapshot, a member snapshot on each image; both members restored and read back; no image or group left",
		ready.Round(time.Millisecond), groups[0])
}

// poolGroups lists the pool's RBD groups.
func poolGroups(ctx context.Context, t *testing.T, c *e2e.Cluster) []string {
	out, err := c.Ceph.Rbd(ctx, "group", "ls", "--format", "json", c.Pool)
	must(t, err)
	var names []string
	must(t, json.Unmarshal(out, &names))
	return names
}

// groupMembers maps each source claim of a VolumeGroupSnapshot to the
// member VolumeSnapshot the snapshot-controller made for it (owned by
// the group snapshot).
func groupMembers(ctx context.Context, t *testing.T, c *e2e.Cluster, vgs string) map[string]string {
	out, err := c.Kubectl(ctx, "get", "volumesnapshots", "-o", "json")
	must(t, err)
	var list struct {
		Items []struct {
			Metadata struct {
				Name            string
				OwnerReferences []struct{ Kind, Name string } `json:"ownerReferences"`
			} `json:"metadata"`
			Spec struct {
				Source struct {
					PersistentVolumeClaimName string `json:"persistentVolumeClaimName"`
				} `json:"source"`
			} `json:"spec"`
		} `json:"items"`
	}
	must(t, json.Unmarshal(out, &list))
	m := map[string]string{}
	for _, s := range list.Items {
		for _, o := range s.Metadata.OwnerReferences {
			if o.Kind == "VolumeGroupSnapshot" && o.Name == vgs {
				m[s.Spec.Source.PersistentVolumeClaimName] = s.Metadata.Name
			}
		}
	}
	return m
}

// waitLog waits until a pod's log holds want.
func waitLog(ctx context.Context, t *testing.T, c *e2e.Cluster, pod, want string, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; {
		out, err := c.Kubectl(ctx, "logs", pod)
		if err == nil && strings.Contains(string(out), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s did not log %s within %v: %s", pod, want, limit, out)
		}
		time.Sleep(2 * time.Second)
	}
}

// The write IOPS limits of qos-vac's two VolumeAttributesClasses.
const (
	qosSlowIOPS = 5
	qosFastIOPS = 50
)

// qosVolumeAttributesClass: a raw block claim of a VolumeAttributesClass
// limiting write IOPS, a pod streaming synced 4 KiB O_DIRECT writes to
// it (one write operation each, so the writes per second are the write
// IOPS the volume gets); the claim is switched to a class with a higher
// limit while the pod runs. What is checked: the image's metadata in
// Ceph holds each class's limit in turn (conf_rbd_qos_write_iops_limit,
// where the controller writes it), the claim reports the new class, the
// same pod keeps running without a write error (no remount), and the
// pod's write rate, measured from its own per-second counts, stays near
// the low limit and then rises above it toward the new one. The bounds
// are loose: the VM's own speed may stay below the higher limit.
func qosVolumeAttributesClass(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	const name = "qos"
	for cl, iops := range map[string]int{"qos-slow": qosSlowIOPS, "qos-fast": qosFastIOPS} {
		must(t, c.Apply(ctx, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: VolumeAttributesClass
metadata: {name: %s}
driverName: rbd.purerbd.io
parameters:
  rbd_qos_write_iops_limit: "%d"
`, cl, iops)))
	}
	must(t, c.Apply(ctx, e2e.PVC{Name: name, Size: "64Mi", Block: true, VolumeAttributesClass: "qos-slow"}.Manifest()))
	pv, err := c.WaitPVCBound(ctx, name, 3*time.Minute)
	must(t, err)
	image, err := c.ImageOf(ctx, pv)
	must(t, err)
	waitImageMeta(ctx, t, c, image, "conf_rbd_qos_write_iops_limit", fmt.Sprint(qosSlowIOPS), time.Minute)

	must(t, c.Apply(ctx, e2e.Pod{Name: name + "-w", Claim: name, Block: true, Command: []string{"/bin/workload", "stream",
		"--path", "/dev/xvda", "--size", "4k", "--direct", "--interval", "0", "--slots", "1024"}}.Manifest()))
	must(t, c.WaitPodRunning(ctx, name+"-w", 5*time.Minute))
	uid, err := c.Kubectl(ctx, "get", "pod", name+"-w", "-o", "jsonpath={.metadata.uid}")
	must(t, err)
	// past the first second's burst
	time.Sleep(5 * time.Second)
	slow := writeRate(ctx, t, c, name+"-w", 15*time.Second)

	tm := time.Now()
	_, err = c.Kubectl(ctx, "patch", "pvc", name, "--type=merge", "-p", `{"spec":{"volumeAttributesClassName":"qos-fast"}}`)
	must(t, err)
	if _, err := c.Kubectl(ctx, "wait", "--for=jsonpath={.status.currentVolumeAttributesClassName}=qos-fast", "--timeout=3m", "pvc/"+name); err != nil {
		out, _ := c.Kubectl(ctx, "describe", "pvc/"+name)
		t.Fatalf("%v\n%s", err, out)
	}
	waitImageMeta(ctx, t, c, image, "conf_rbd_qos_write_iops_limit", fmt.Sprint(qosFastIOPS), time.Minute)
	modified := time.Since(tm)
	time.Sleep(2 * time.Second)
	fast := writeRate(ctx, t, c, name+"-w", 15*time.Second)

	uid2, err := c.Kubectl(ctx, "get", "pod", name+"-w", "-o", "jsonpath={.metadata.uid} {.status.phase} {.status.containerStatuses[0].restartCount}")
	must(t, err)
	if want := string(uid) + " Running 0"; strings.TrimSpace(string(uid2)) != want {
		t.Fatalf("the writer pod after the class change: %q, want %q (the same pod, running, never restarted)", uid2, want)
	}
	last := streamStats(ctx, t, c, name+"-w")
	if last.Errors != 0 {
		t.Fatalf("the writer saw %d write errors across the class change: %+v", last.Errors, last)
	}
	// loose: the low limit held (its burst allowance spread over the
	// window included), and the rate rose clearly once it was lifted
	if slow > qosSlowIOPS*1.5+1 {
		t.Errorf("under a write IOPS limit of %d the pod wrote %.1f/s", qosSlowIOPS, slow)
	}
	if fast < slow*1.5 || fast < qosSlowIOPS*1.5 {
		t.Errorf("after the change to a limit of %d the pod writes %.1f/s, before %.1f/s: the new limit did not take effect", qosFastIOPS, fast, slow)
	}
	if fast > qosFastIOPS*1.5+1 {
		t.Errorf("under a write IOPS limit of %d the pod wrote %.1f/s", qosFastIOPS, fast)
	}
	must(t, c.Delete(ctx, "pod/"+name+"-w", "pvc/"+name))
	must(t, waitImageGone(ctx, c, image, 3*time.Minute))
	must(t, c.Delete(ctx, "volumeattributesclass/qos-slow", "volumeattributesclass/qos-fast"))
	return fmt.Sprintf("write IOPS limit %d → %d changed under a running pod in %v (PVC status and image metadata); the pod wrote %.1f/s, then %.1f/s; no remount, no write error",
		qosSlowIOPS, qosFastIOPS, modified.Round(time.Millisecond), slow, fast)
}

// waitImageMeta waits until an image's metadata key holds want.
func waitImageMeta(ctx context.Context, t *testing.T, c *e2e.Cluster, image, key, want string, limit time.Duration) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(limit); ; {
		out, err := c.Ceph.Rbd(ctx, "image-meta", "get", c.Pool+"/"+image, key)
		got = strings.TrimSpace(string(out))
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rbd image-meta get %s %s: %q (%v), want %q", image, key, got, err, want)
		}
		time.Sleep(2 * time.Second)
	}
}

// streamStat is the part of a workload stream progress line the QoS
// scenario reads.
type streamStat struct {
	ElapsedS float64 `json:"elapsed_s"`
	Writes   int64   `json:"writes"`
	Errors   int64   `json:"errors"`
}

// streamStats is the last progress line of a pod running workload
// stream.
func streamStats(ctx context.Context, t *testing.T, c *e2e.Cluster, pod string) streamStat {
	t.Helper()
	out, err := c.Kubectl(ctx, "logs", pod, "--tail=1")
	must(t, err)
	var s streamStat
	if err := json.Unmarshal(bytes.TrimSpace(out), &s); err != nil {
		t.Fatalf("pod %s's last log line %q: %v", pod, out, err)
	}
	return s
}

// writeRate is the writes per second a workload stream pod reports over
// about window.
func writeRate(ctx context.Context, t *testing.T, c *e2e.Cluster, pod string, window time.Duration) float64 {
	t.Helper()
	a := streamStats(ctx, t, c, pod)
	time.Sleep(window)
	b := streamStats(ctx, t, c, pod)
	if b.ElapsedS <= a.ElapsedS {
		t.Fatalf("pod %s reported no progress in %v: %+v then %+v", pod, window, a, b)
	}
	return float64(b.Writes-a.Writes) / (b.ElapsedS - a.ElapsedS)
}
