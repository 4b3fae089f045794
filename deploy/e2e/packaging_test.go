package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e"
)

// packagingScenarios run after every other scenario: the last one
// replaces the installation the others used.
var packagingScenarios = []scenario{{"helm-kustomize", helmAndKustomize}}

// helmAndKustomize checks the Helm chart and the kustomization as an
// operator uses them: both renderings are accepted by the API server
// (server-side dry run); the chart renders exactly the objects the
// manifests hold, plus those its values ask for; then the kustomize
// installation the other scenarios ran on is deleted and the chart
// installed in its place (helm install --wait), and a claim of the
// chart's StorageClass is provisioned, written and read back by pods,
// with the controller's and the provisioner's metrics counting the
// CreateVolume.
func helmAndKustomize(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	helm, err := e2e.HelmBinary(ctx, os.Stderr)
	must(t, err)
	chart := filepath.Join(c.RepoRoot, "deploy", "helm", "purerbd-csi")
	kust := filepath.Join(c.RepoRoot, "deploy", "kubernetes")
	values := filepath.Join(t.TempDir(), "values.yaml")
	mons, _ := json.Marshal(c.Ceph.MonAddrs)
	must(t, os.WriteFile(values, fmt.Appendf(nil, `csiConfig:
  - clusterID: %q
    monitors: %s
    rbd: {radosNamespace: ""}
secret:
  userID: %q
  userKey: %q
storageClass: {create: true, name: purerbd-helm, clusterID: %q, pool: %q}
snapshotClass: {create: true, name: purerbd-helm, clusterID: %q}
groupSnapshotClass: {create: true, name: purerbd-helm, clusterID: %q}
`, c.ClusterID, mons, c.CephUser, c.CephKey, c.ClusterID, c.Pool, c.ClusterID, c.ClusterID), 0o600))

	// 1. both renderings pass the API server's validation and admission
	rendered, err := c.Helm(ctx, helm, "template", "purerbd", chart, "-n", "purerbd", "-f", values)
	must(t, err)
	_, err = c.KubectlInput(ctx, rendered, "apply", "--dry-run=server", "-f", "-")
	must(t, err)
	built, err := c.Kubectl(ctx, "kustomize", kust)
	must(t, err)
	_, err = c.KubectlInput(ctx, built, "apply", "--dry-run=server", "-f", "-")
	must(t, err)

	// 2. the chart at the manifests' settings renders what they hold
	same, err := c.Helm(ctx, helm, "template", "purerbd", chart, "-n", "purerbd", "-f", values,
		"--set", "controllerSecret=purerbd-csi-controller")
	must(t, err)
	toObjects := func(yaml []byte) []e2e.Object {
		out, err := c.KubectlInput(ctx, yaml, "create", "--dry-run=client", "-o", "json", "-f", "-")
		must(t, err)
		objs, err := e2e.DecodeObjects(out)
		must(t, err)
		return objs
	}
	plain, fromChart := toObjects(built), toObjects(same)
	for _, o := range fromChart {
		e2e.StripHelmMeta(o)
	}
	if d := e2e.CompareObjects(plain, fromChart, []string{"Namespace"},
		[]string{"ConfigMap", "Secret", "StorageClass", "VolumeSnapshotClass", "VolumeGroupSnapshotClass"}); len(d) > 0 {
		t.Fatalf("the Helm chart and deploy/kubernetes differ:\n%s", strings.Join(d, "\n"))
	}
	// and with changed-block tracking: the chart's snapshotMetadata
	// against the manifests with the snapshot-metadata component
	overlay := filepath.Join(t.TempDir(), "cbt")
	must(t, e2e.WriteOverlay(overlay, kust, filepath.Join(kust, "snapshot-metadata")))
	builtCBT, err := c.Kubectl(ctx, "kustomize", overlay)
	must(t, err)
	_, err = c.KubectlInput(ctx, builtCBT, "apply", "--dry-run=server", "-f", "-")
	must(t, err)
	sameCBT, err := c.Helm(ctx, helm, "template", "purerbd", chart, "-n", "purerbd", "-f", values,
		"--set", "controllerSecret=purerbd-csi-controller", "--set", "snapshotMetadata.enabled=true")
	must(t, err)
	plainCBT, fromChartCBT := toObjects(builtCBT), toObjects(sameCBT)
	for _, o := range fromChartCBT {
		e2e.StripHelmMeta(o)
		e2e.SortNamedLists(o)
	}
	for _, o := range plainCBT {
		e2e.SortNamedLists(o)
	}
	if d := e2e.CompareObjects(plainCBT, fromChartCBT, []string{"Namespace"},
		[]string{"ConfigMap", "Secret", "StorageClass", "VolumeSnapshotClass", "VolumeGroupSnapshotClass"}); len(d) > 0 {
		t.Fatalf("the Helm chart with snapshotMetadata.enabled and deploy/kubernetes with its snapshot-metadata component differ:\n%s", strings.Join(d, "\n"))
	}
	if len(plainCBT) != len(plain)+3 {
		t.Fatalf("the snapshot-metadata component adds %d objects, want 3 (Service, ClusterRole, ClusterRoleBinding)", len(plainCBT)-len(plain))
	}

	// 3. the kustomize installation out, the chart's in
	td := time.Now()
	_, err = c.Kubectl(ctx, "delete", "-k", kust, "--wait=true", "--timeout=5m")
	must(t, err)
	_, err = c.Kubectl(ctx, "create", "namespace", "purerbd")
	must(t, err)
	_, err = c.Kubectl(ctx, "label", "namespace", "purerbd", "pod-security.kubernetes.io/enforce=privileged")
	must(t, err)
	ti := time.Now()
	if _, err := c.Helm(ctx, helm, "install", "purerbd", chart, "-n", "purerbd", "-f", values, "--wait", "--timeout", "10m"); err != nil {
		out, _ := c.Kubectl(ctx, "-n", "purerbd", "get", "pods", "-o", "wide")
		t.Fatalf("%v\n%s", err, out)
	}
	must(t, c.WaitDriverRegistered(ctx, "rbd.purerbd.io", 3*time.Minute))
	installed := time.Since(ti)

	// 4. a claim of the chart's StorageClass, end to end
	const name = "helm-rt"
	must(t, c.Apply(ctx, e2e.PVC{Name: name, Size: "128Mi", StorageClass: "purerbd-helm"}.Manifest()))
	pv, err := c.WaitPVCBound(ctx, name, 3*time.Minute)
	must(t, err)
	image, err := c.ImageOf(ctx, pv)
	must(t, err)
	writeRecords(ctx, t, c, name+"-w", name, 21)
	verifyRecords(ctx, t, c, name+"-r", name, 21, false)

	// 5. the new controller's metrics count that CreateVolume
	out, err := c.Kubectl(ctx, "-n", "purerbd", "get", "pods", "-l", "app.kubernetes.io/component=controller",
		"-o", "jsonpath={.items[0].metadata.name}")
	must(t, err)
	ctrl := strings.TrimSpace(string(out))
	s, err := c.Scrape(ctx, "purerbd", ctrl, 9090)
	must(t, err)
	created, _ := s.Sum("purerbd_csi_calls_total", map[string]string{"method": "/csi.v1.Controller/CreateVolume", "code": "OK"})
	if created < 1 {
		t.Errorf("purerbd_csi_calls_total{method=CreateVolume,code=OK} is %v after a claim was provisioned", created)
	}
	s, err = c.Scrape(ctx, "purerbd", ctrl, 8080)
	must(t, err)
	sidecar, _ := s.Sum("csi_sidecar_operations_seconds_count", map[string]string{"method_name": "/csi.v1.Controller/CreateVolume"})
	if sidecar < 1 {
		t.Errorf("csi-provisioner's csi_sidecar_operations_seconds_count{method_name=CreateVolume} is %v", sidecar)
	}

	must(t, c.Delete(ctx, "pvc/"+name))
	must(t, waitImageGone(ctx, c, image, 3*time.Minute))
	return fmt.Sprintf("helm template and kubectl kustomize accepted (server dry run), chart ≡ manifests, also with changed-block tracking; kustomize install replaced by helm install in %v (installed and registered in %v); claim provisioned, written, read back, deleted; CreateVolume counted by purerbd-csi (%.0f) and csi-provisioner (%.0f)",
		time.Since(td).Round(time.Second), installed.Round(time.Second), created, sidecar)
}
