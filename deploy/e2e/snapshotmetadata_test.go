package e2e_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e"
)

func init() {
	scenarios = append(scenarios, scenario{"snapshot-metadata", snapshotMetadata})
}

// smsName is the Service (and the name in its certificate) the
// snapshot-metadata component serves on, in the purerbd namespace.
const smsName = "purerbd-csi-snapshot-metadata"

// smsCAPlaceholder is the caCert line example/snapshotmetadataservice.yaml
// asks the operator to edit.
const smsCAPlaceholder = `"<base64 of the CA certificate that signed the Secret's tls.crt>"`

// rbdSnap is one snapshot as `rbd snap ls --format json` lists it.
type rbdSnap struct {
	ID   uint64 `json:"id"`
	Name string `json:"name"`
}

// cbtWrite is one write of the scenario's writer pods: n bytes of
// random data at off.
type cbtWrite struct{ off, n int64 }

const mib = 1 << 20

// snapshotMetadata: changed-block tracking as a backup tool uses it.
// The operator adds the snapshot-metadata component to the shipped
// manifests with a TLS Secret its own CA signed, and the example
// SnapshotMetadataService with that CA; a raw block claim is written,
// snapshotted, written elsewhere and snapshotted again; upstream's
// example backup client, snapshot-metadata-lister, run in a pod under a
// ServiceAccount with upstream's client role, lists the second
// snapshot's allocated blocks and the blocks changed since the first
// through the sidecar (token audience, TLS, access review) and
// purerbd-csi. Both lists must cover exactly what Ceph's `rbd diff`
// (and `rbd diff --from-snap`) reports for the RBD snapshots, and the
// delta must hold every second-round write and none of the first
// round's objects. Then the component is taken out again.
func snapshotMetadata(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	k := filepath.Join(c.RepoRoot, "deploy", "kubernetes")
	dir := t.TempDir()

	// 1. the operator: a certificate for the Service's name, the
	// component, the SnapshotMetadataService naming the CA
	caPath, crt, key, err := e2e.ServingCertificate(dir, []string{smsName + ".purerbd", smsName + ".purerbd.svc", smsName + ".purerbd.svc.cluster.local"})
	must(t, err)
	_, err = c.Kubectl(ctx, "-n", "purerbd", "create", "secret", "tls", smsName+"-tls", "--cert="+crt, "--key="+key)
	must(t, err)
	overlay := filepath.Join(dir, "overlay")
	must(t, e2e.WriteOverlay(overlay, k, filepath.Join(k, "snapshot-metadata")))
	ti := time.Now()
	_, err = c.Kubectl(ctx, "apply", "-k", overlay)
	must(t, err)
	t.Cleanup(func() { removeSnapshotMetadata(t, c, k) })
	_, err = c.Kubectl(ctx, "-n", "purerbd", "rollout", "status", "deployment/purerbd-csi-controller", "--timeout=5m")
	must(t, err)
	installed := time.Since(ti)
	ca, err := os.ReadFile(caPath)
	must(t, err)
	sms, err := os.ReadFile(filepath.Join(k, "example", "snapshotmetadataservice.yaml"))
	must(t, err)
	if !strings.Contains(string(sms), smsCAPlaceholder) {
		t.Fatalf("example/snapshotmetadataservice.yaml: no caCert placeholder %s to edit", smsCAPlaceholder)
	}
	sms = []byte(strings.Replace(string(sms), smsCAPlaceholder, base64.StdEncoding.EncodeToString(ca), 1))
	_, err = c.KubectlInput(ctx, sms, "apply", "-f", "-")
	must(t, err)

	// 2. a raw block claim written in two rounds, a snapshot after each
	// (4 MiB objects: the first round touches objects 0, 2 and 7, the
	// second 3, 10 and 15)
	rounds := [][]cbtWrite{
		{{0, 1 * mib}, {8 * mib, 2 * mib}, {30 * mib, 64 << 10}},
		{{12 * mib, 64 << 10}, {40 * mib, 1 * mib}, {63 * mib, 64 << 10}},
	}
	must(t, c.Apply(ctx, e2e.PVC{Name: "cbt", Size: "64Mi", Block: true}.Manifest()))
	pv, err := c.WaitPVCBound(ctx, "cbt", 3*time.Minute)
	must(t, err)
	img, err := c.ImageOf(ctx, pv)
	must(t, err)
	for i, round := range rounds {
		var sh []string
		for _, w := range round {
			sh = append(sh, fmt.Sprintf("dd if=/dev/urandom of=/dev/xvda bs=65536 seek=%d count=%d conv=fsync", w.off/65536, w.n/65536))
		}
		pod := fmt.Sprintf("cbt-w%d", i+1)
		_, err := c.RunPod(ctx, e2e.Pod{Name: pod, Claim: "cbt", Block: true, Command: []string{"/bin/sh", "-c", "set -e; " + strings.Join(sh, "; ")}}, 5*time.Minute)
		must(t, err)
		must(t, c.Delete(ctx, "pod/"+pod))
		snap := fmt.Sprintf("cbt-s%d", i+1)
		must(t, c.Apply(ctx, fmt.Sprintf(`apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: %s}
spec:
  volumeSnapshotClassName: purerbd
  source: {persistentVolumeClaimName: cbt}
`, snap)))
		waitReadyToUse(ctx, t, c, "volumesnapshot/"+snap)
	}
	t.Cleanup(func() {
		if err := c.Delete(ctx, "volumesnapshot/cbt-s2", "volumesnapshot/cbt-s1", "pvc/cbt"); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})

	// Ceph's view: the image's two snapshots, oldest first
	out, err := c.Ceph.Rbd(ctx, "snap", "ls", "--format", "json", c.Pool+"/"+img)
	must(t, err)
	var snaps []rbdSnap
	must(t, json.Unmarshal(out, &snaps))
	if len(snaps) != 2 {
		t.Fatalf("rbd snap ls %s: %s (want the two VolumeSnapshots' snapshots)", img, out)
	}
	slices.SortFunc(snaps, func(a, b rbdSnap) int { return cmp.Compare(a.ID, b.ID) })
	wantAlloc := rbdDiff(ctx, t, c, img, "", snaps[1].Name)
	wantDelta := rbdDiff(ctx, t, c, img, snaps[0].Name, snaps[1].Name)

	// 3. the backup application: a ServiceAccount with upstream's client
	// role, the lister in a pod. This cluster runs no service proxy and
	// no DNS: the pod resolves the Service's name through hostAliases to
	// the address the Service's EndpointSlice holds, as DNS and
	// kube-proxy would take it there.
	role, err := os.ReadFile(c.Addons.SnapshotMetadataClientRole)
	must(t, err)
	_, err = c.KubectlInput(ctx, role, "apply", "-f", "-")
	must(t, err)
	must(t, c.Apply(ctx, `apiVersion: v1
kind: ServiceAccount
metadata: {name: cbt-backup}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cbt-backup}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: external-snapshot-metadata-client-runner}
subjects: [{kind: ServiceAccount, name: cbt-backup, namespace: default}]
`))
	t.Cleanup(func() {
		if err := c.Delete(ctx, "pod/cbt-allocated", "pod/cbt-delta", "clusterrolebinding/cbt-backup", "serviceaccount/cbt-backup", "clusterrole/external-snapshot-metadata-client-runner"); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	ep := serviceEndpoint(ctx, t, c, "purerbd", smsName, 2*time.Minute)
	tl := time.Now()
	gotAlloc := listSnapshotMetadata(ctx, t, c, "cbt-allocated", ep, "-s", "cbt-s2")
	gotDelta := listSnapshotMetadata(ctx, t, c, "cbt-delta", ep, "-s", "cbt-s2", "-p", "cbt-s1")
	listed := time.Since(tl)
	// the sidecar's own metrics (its --http-endpoint, in the metrics
	// Service) count both calls
	out, err = c.Kubectl(ctx, "-n", "purerbd", "get", "pods", "-l", "app.kubernetes.io/component=controller",
		"--field-selector", "status.podIP="+ep, "-o", "jsonpath={.items[0].metadata.name}")
	must(t, err)
	ms, err := c.Scrape(ctx, "purerbd", strings.TrimSpace(string(out)), 8083)
	must(t, err)
	if calls, _ := ms.Sum("snapshot_metadata_controller_operations_seconds_count", nil); calls < 2 {
		t.Errorf("the sidecar's snapshot_metadata_controller_operations_seconds_count is %v after two listings", calls)
	}

	// 4. the lists against Ceph's, and against the writes
	if !slices.Equal(gotAlloc, wantAlloc) {
		t.Fatalf("allocated blocks of cbt-s2 through the sidecar: %v; rbd diff of snapshot %s: %v", gotAlloc, snaps[1].Name, wantAlloc)
	}
	if !slices.Equal(gotDelta, wantDelta) {
		t.Fatalf("blocks changed from cbt-s1 to cbt-s2 through the sidecar: %v; rbd diff --from-snap %s of snapshot %s: %v", gotDelta, snaps[0].Name, snaps[1].Name, wantDelta)
	}
	for i, round := range rounds {
		for _, w := range round {
			if !covers(gotAlloc, w) {
				t.Fatalf("allocated blocks %v miss round %d's write [%d, +%d)", gotAlloc, i+1, w.off, w.n)
			}
			obj := cbtWrite{w.off &^ (4*mib - 1), 4 * mib}
			if i == 1 && !covers(gotDelta, w) {
				t.Fatalf("changed blocks %v miss round 2's write [%d, +%d)", gotDelta, w.off, w.n)
			}
			if i == 0 && overlaps(gotDelta, obj) {
				t.Fatalf("changed blocks %v hold object [%d, +%d), which only round 1 wrote", gotDelta, obj.off, obj.n)
			}
		}
	}
	return fmt.Sprintf("component installed in %v; snapshot-metadata-lister through the sidecar in %v: %d allocated ranges (%d MiB) and %d changed (%d MiB), each exactly rbd diff's",
		installed.Round(time.Second), listed.Round(time.Second), len(gotAlloc), total(gotAlloc)/mib, len(gotDelta), total(gotDelta)/mib)
}

// removeSnapshotMetadata takes the component out as an operator would:
// the base kustomization applied again (which drops the sidecar from
// the controller), then the component's own objects, the Secret and the
// SnapshotMetadataService.
func removeSnapshotMetadata(t *testing.T, c *e2e.Cluster, k string) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if _, err := c.Kubectl(ctx, "apply", "-k", k); err != nil {
		t.Errorf("re-applying deploy/kubernetes: %v", err)
		return
	}
	if err := c.Delete(ctx, "-n", "purerbd", "service/"+smsName, "secret/"+smsName+"-tls"); err != nil {
		t.Errorf("removing the component: %v", err)
	}
	if err := c.Delete(ctx, "clusterrolebinding/"+smsName, "clusterrole/"+smsName, "snapshotmetadataservice/rbd.purerbd.io"); err != nil {
		t.Errorf("removing the component: %v", err)
	}
	if _, err := c.Kubectl(ctx, "-n", "purerbd", "rollout", "status", "deployment/purerbd-csi-controller", "--timeout=5m"); err != nil {
		t.Errorf("the controller without the component: %v", err)
	}
}

// serviceEndpoint waits for a ready address in the Service's
// EndpointSlices and returns it.
func serviceEndpoint(ctx context.Context, t *testing.T, c *e2e.Cluster, ns, svc string, limit time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(limit); ; {
		out, err := c.Kubectl(ctx, "-n", ns, "get", "endpointslices", "-l", "kubernetes.io/service-name="+svc,
			"-o", `jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}`)
		if err == nil {
			if addrs := strings.Fields(string(out)); len(addrs) == 1 {
				return addrs[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no single ready endpoint of service %s/%s within %v: %q %v", ns, svc, limit, out, err)
		}
		time.Sleep(2 * time.Second)
	}
}

// listSnapshotMetadata runs snapshot-metadata-lister (JSON output) with
// args in a pod of the backup ServiceAccount and returns the ranges it
// printed, merged.
func listSnapshotMetadata(ctx context.Context, t *testing.T, c *e2e.Cluster, pod, endpoint string, args ...string) []cbtWrite {
	t.Helper()
	argv, _ := json.Marshal(append([]string{"-n", "default", "-o", "json"}, args...))
	logs, err := c.RunPodManifest(ctx, pod, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  serviceAccountName: cbt-backup
  restartPolicy: Never
  hostAliases: [{ip: %q, hostnames: [%s.purerbd]}]
  containers:
  - name: lister
    image: %s
    imagePullPolicy: Never
    args: %s
`, pod, endpoint, smsName, c.Addons.SnapshotMetadataLister, argv), 3*time.Minute)
	if err != nil {
		sidecar, _ := c.Kubectl(ctx, "-n", "purerbd", "logs", "deployment/purerbd-csi-controller", "-c", "csi-snapshot-metadata", "--tail=40")
		t.Fatalf("snapshot-metadata-lister %v: %v\n--- the sidecar:\n%s", args, err, sidecar)
	}
	var records []struct {
		Type     int   `json:"block_metadata_type"`
		Capacity int64 `json:"volume_capacity_bytes"`
		Blocks   []struct {
			Offset int64 `json:"byte_offset"`
			Size   int64 `json:"size_bytes"`
		} `json:"block_metadata"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(logs)), &records); err != nil {
		t.Fatalf("snapshot-metadata-lister %v printed no JSON list: %v\n%s", args, err, logs)
	}
	var got []cbtWrite
	for _, r := range records {
		if r.Type != 2 || r.Capacity != 64*mib {
			t.Fatalf("snapshot-metadata-lister %v: a record of type %d for %d bytes, want variable-length (2) ranges of a 64 MiB volume", args, r.Type, r.Capacity)
		}
		for _, b := range r.Blocks {
			got = append(got, cbtWrite{b.Offset, b.Size})
		}
	}
	return merged(got)
}

// rbdDiff is Ceph's `rbd diff` of snapshot snap of image (from
// snapshot from when it is not empty), merged.
func rbdDiff(ctx context.Context, t *testing.T, c *e2e.Cluster, image, from, snap string) []cbtWrite {
	t.Helper()
	args := []string{"diff", "--format", "json", c.Pool + "/" + image + "@" + snap}
	if from != "" {
		args = append(args, "--from-snap", from)
	}
	out, err := c.Ceph.Rbd(ctx, args...)
	must(t, err)
	var ext []struct {
		Offset int64  `json:"offset"`
		Length int64  `json:"length"`
		Exists string `json:"exists"`
	}
	must(t, json.Unmarshal(out, &ext))
	var got []cbtWrite
	for _, e := range ext {
		if e.Exists != "true" {
			t.Fatalf("rbd %s: a discarded extent %+v where nothing was discarded", strings.Join(args, " "), e)
		}
		got = append(got, cbtWrite{e.Offset, e.Length})
	}
	return merged(got)
}

// merged sorts ranges and joins those that touch.
func merged(rs []cbtWrite) []cbtWrite {
	slices.SortFunc(rs, func(a, b cbtWrite) int { return cmp.Compare(a.off, b.off) })
	var out []cbtWrite
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].off+out[n-1].n >= r.off {
			out[n-1].n = max(out[n-1].n, r.off+r.n-out[n-1].off)
			continue
		}
		out = append(out, r)
	}
	return out
}

// covers says whether merged ranges rs hold all of w.
func covers(rs []cbtWrite, w cbtWrite) bool {
	for _, r := range rs {
		if r.off <= w.off && w.off+w.n <= r.off+r.n {
			return true
		}
	}
	return false
}

// overlaps says whether any of rs shares a byte with w.
func overlaps(rs []cbtWrite, w cbtWrite) bool {
	for _, r := range rs {
		if r.off < w.off+w.n && w.off < r.off+r.n {
			return true
		}
	}
	return false
}

func total(rs []cbtWrite) int64 {
	var n int64
	for _, r := range rs {
		n += r.n
	}
	return n
}
