package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Addons are the cluster add-ons the manifests expect and do not ship:
// the snapshot and group snapshot CRDs and the snapshot-controller
// (files to kubectl apply), and for changed-block tracking the
// SnapshotMetadataService CRD; plus what a backup application brings
// (the client's ClusterRole and the lister's image), which scenarios
// use.
type Addons struct {
	SnapshotCRDs        []string
	SnapshotController  []string
	SnapshotMetadataCRD string
	// SnapshotMetadataClientRole is upstream's ClusterRole for backup
	// applications; SnapshotMetadataLister the image of its example
	// client.
	SnapshotMetadataClientRole string
	SnapshotMetadataLister     string
}

var (
	monitorsLine  = regexp.MustCompile(`"monitors":\s*\[[^\]]*\]`)
	clusterIDLine = regexp.MustCompile(`"clusterID":\s*"([^"]+)"`)
)

const keyPlaceholder = `"<the output of: ceph auth get-key client.kubernetes>"`

// Deploy installs purerbd as deploy/README.md tells a user: the
// namespace, the example ConfigMap and Secrets edited where the README
// says to edit them (the monitors, the keys), the kustomization of
// deploy/kubernetes (kubectl apply -k), then the example StorageClass,
// VolumeSnapshotClass and VolumeGroupSnapshotClass; the snapshot add-ons
// (and the SnapshotMetadataService CRD, a cluster add-on too) first. It
// records addons in c.Addons. It returns when the
// controller and the node plugin are rolled out and the kubelet lists
// the driver on the node.
func (c *Cluster) Deploy(ctx context.Context, addons Addons) error {
	k := filepath.Join(c.RepoRoot, "deploy", "kubernetes")
	ex := filepath.Join(k, "example")
	apply := func(files ...string) error {
		args := []string{"apply"}
		for _, f := range files {
			args = append(args, "-f", f)
		}
		_, err := c.Kubectl(ctx, args...)
		return err
	}
	c.Addons = addons
	if err := apply(append(addons.SnapshotCRDs, addons.SnapshotMetadataCRD)...); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/snapshotmetadataservices.cbt.storage.k8s.io",
		"crd/volumesnapshots.snapshot.storage.k8s.io", "crd/volumesnapshotcontents.snapshot.storage.k8s.io",
		"crd/volumesnapshotclasses.snapshot.storage.k8s.io",
		"crd/volumegroupsnapshots.groupsnapshot.storage.k8s.io", "crd/volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io",
		"crd/volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io"); err != nil {
		return err
	}
	if err := apply(addons.SnapshotController...); err != nil {
		return err
	}
	if err := apply(filepath.Join(k, "namespace.yaml"), filepath.Join(ex, "kms-config.yaml")); err != nil {
		return err
	}
	cm, err := os.ReadFile(filepath.Join(ex, "config-map.yaml"))
	if err != nil {
		return err
	}
	m := clusterIDLine.FindSubmatch(cm)
	if m == nil || !monitorsLine.Match(cm) {
		return fmt.Errorf("example/config-map.yaml: no clusterID or monitors line to edit")
	}
	c.ClusterID = string(m[1])
	mons, _ := json.Marshal(c.Ceph.MonAddrs)
	cm = monitorsLine.ReplaceAll(cm, []byte(`"monitors": `+string(mons)))
	if _, err := c.KubectlInput(ctx, cm, "apply", "-f", "-"); err != nil {
		return err
	}
	sec, err := os.ReadFile(filepath.Join(ex, "secret.yaml"))
	if err != nil {
		return err
	}
	if !strings.Contains(string(sec), keyPlaceholder) {
		return fmt.Errorf("example/secret.yaml: no key placeholder %s to edit", keyPlaceholder)
	}
	sec = []byte(strings.ReplaceAll(string(sec), keyPlaceholder, `"`+c.CephKey+`"`))
	if _, err := c.KubectlInput(ctx, sec, "apply", "-f", "-"); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "apply", "-k", k); err != nil {
		return err
	}
	if err := apply(filepath.Join(ex, "storageclass.yaml"), filepath.Join(ex, "snapshotclass.yaml"), filepath.Join(ex, "groupsnapshotclass.yaml")); err != nil {
		return err
	}
	for _, r := range []string{"daemonset/purerbd-csi-node", "deployment/purerbd-csi-controller"} {
		if _, err := c.Kubectl(ctx, "-n", "purerbd", "rollout", "status", r, "--timeout=10m"); err != nil {
			return fmt.Errorf("%w\n%s", err, c.describe(ctx, "purerbd"))
		}
	}
	return c.WaitDriverRegistered(ctx, "rbd.purerbd.io", 3*time.Minute)
}

// WaitDriverRegistered waits until the node's CSINode lists driver: the
// kubelet took the plugin's registration.
func (c *Cluster) WaitDriverRegistered(ctx context.Context, driver string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var out []byte
	for time.Now().Before(deadline) {
		var err error
		out, err = c.Kubectl(ctx, "get", "csinode", c.Node, "-o", "jsonpath={.spec.drivers[*].name}")
		if err == nil && strings.Contains(string(out), driver) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return fmt.Errorf("the kubelet did not register %s within %v (CSINode drivers: %q)", driver, limit, out)
}

// describe is what a user looks at when a rollout hangs: the pods of a
// namespace, their events, the plugin's logs.
func (c *Cluster) describe(ctx context.Context, ns string) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"-n", ns, "get", "pods", "-o", "wide"},
		{"-n", ns, "describe", "pods"},
		{"-n", ns, "logs", "--all-containers", "--prefix", "--tail=40", "-l", "app.kubernetes.io/part-of=purerbd"},
	} {
		out, err := c.Kubectl(ctx, args...)
		fmt.Fprintf(&b, "$ kubectl %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}
