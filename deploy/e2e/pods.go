package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e/images"
)

// PVC is a claim to create.
type PVC struct {
	Name         string
	Size         string // "64Mi"
	Block        bool   // volumeMode: Block
	AccessMode   string // default ReadWriteOnce
	StorageClass string // default "purerbd"
	// DataSource, when set, is "VolumeSnapshot/NAME" or
	// "PersistentVolumeClaim/NAME".
	DataSource string
	// Labels of the claim (a VolumeGroupSnapshot selects claims by
	// label).
	Labels map[string]string
	// VolumeAttributesClass, when set, is the claim's
	// volumeAttributesClassName (its mutable parameters).
	VolumeAttributesClass string
}

// Manifest is the claim as YAML.
func (p PVC) Manifest() string {
	mode := "Filesystem"
	if p.Block {
		mode = "Block"
	}
	am := p.AccessMode
	if am == "" {
		am = "ReadWriteOnce"
	}
	sc := p.StorageClass
	if sc == "" {
		sc = "purerbd"
	}
	ds := ""
	if p.DataSource != "" {
		kind, name, _ := strings.Cut(p.DataSource, "/")
		group := ""
		if kind == "VolumeSnapshot" {
			group = "\n    apiGroup: snapshot.storage.k8s.io"
		}
		ds = fmt.Sprintf("\n  dataSource:\n    kind: %s\n    name: %s%s", kind, name, group)
	}
	labels := ""
	if len(p.Labels) > 0 {
		l, _ := json.Marshal(p.Labels)
		labels = "\n  labels: " + string(l)
	}
	vac := ""
	if p.VolumeAttributesClass != "" {
		vac = "\n  volumeAttributesClassName: " + p.VolumeAttributesClass
	}
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %s%s
spec:
  storageClassName: %s%s
  volumeMode: %s
  accessModes: [%s]
  resources:
    requests:
      storage: %s%s
`, p.Name, labels, sc, vac, mode, am, p.Size, ds)
}

// Pod is a pod of the workload image with one claim.
type Pod struct {
	Name     string
	Claim    string
	Block    bool // the claim is a raw block device at /dev/xvda, else mounted at /data
	ReadOnly bool
	Command  []string
	// HostPID runs the pod privileged in the node's PID namespace (no
	// claim needed).
	HostPID bool
}

// Manifest is the pod as YAML.
func (p Pod) Manifest() string {
	cmd, _ := json.Marshal(p.Command)
	use := fmt.Sprintf("volumeMounts: [{name: v, mountPath: /data, readOnly: %v}]", p.ReadOnly)
	if p.Block {
		use = "volumeDevices: [{name: v, devicePath: /dev/xvda}]"
	}
	vols := fmt.Sprintf("volumes:\n  - name: v\n    persistentVolumeClaim: {claimName: %s, readOnly: %v}", p.Claim, p.ReadOnly)
	if p.HostPID {
		use, vols = "securityContext: {privileged: true}", "hostPID: true"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  containers:
  - name: w
    image: %s
    imagePullPolicy: Never
    command: %s
    %s
  %s
`, p.Name, images.WorkloadRef, cmd, use, vols)
}

// Apply creates objects from YAML.
func (c *Cluster) Apply(ctx context.Context, yaml string) error {
	_, err := c.KubectlInput(ctx, []byte(yaml), "apply", "-f", "-")
	return err
}

// WaitPVCBound waits until a claim is bound and returns its volume's
// name.
func (c *Cluster) WaitPVCBound(ctx context.Context, name string, limit time.Duration) (string, error) {
	if _, err := c.Kubectl(ctx, "wait", "--for=jsonpath={.status.phase}=Bound", "--timeout="+limit.String(), "pvc/"+name); err != nil {
		return "", fmt.Errorf("%w\n%s", err, c.describeObj(ctx, "pvc/"+name))
	}
	out, err := c.Kubectl(ctx, "get", "pvc", name, "-o", "jsonpath={.spec.volumeName}")
	return strings.TrimSpace(string(out)), err
}

// RunPod creates a pod and waits until it has succeeded, returning its
// log; a pod that fails returns an error holding its log and events.
func (c *Cluster) RunPod(ctx context.Context, p Pod, limit time.Duration) (string, error) {
	return c.RunPodManifest(ctx, p.Name, p.Manifest(), limit)
}

// RunPodManifest is RunPod of any pod: name is the pod manifest's.
func (c *Cluster) RunPodManifest(ctx context.Context, name, manifest string, limit time.Duration) (string, error) {
	if err := c.Apply(ctx, manifest); err != nil {
		return "", err
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		out, err := c.Kubectl(ctx, "get", "pod", name, "-o", "jsonpath={.status.phase}")
		phase := strings.TrimSpace(string(out))
		if err == nil && (phase == "Succeeded" || phase == "Failed") {
			logs, lerr := c.Kubectl(ctx, "logs", name)
			if lerr != nil {
				return "", lerr
			}
			if phase == "Failed" {
				return string(logs), fmt.Errorf("pod %s failed: %s\n%s", name, logs, c.describeObj(ctx, "pod/"+name))
			}
			return string(logs), nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return "", fmt.Errorf("pod %s did not finish within %v\n%s", name, limit, c.describeObj(ctx, "pod/"+name))
}

// WaitPodRunning waits until a pod's containers are running.
func (c *Cluster) WaitPodRunning(ctx context.Context, name string, limit time.Duration) error {
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Ready", "--timeout="+limit.String(), "pod/"+name); err != nil {
		return fmt.Errorf("%w\n%s", err, c.describeObj(ctx, "pod/"+name))
	}
	return nil
}

// Delete deletes objects and waits until they are gone.
func (c *Cluster) Delete(ctx context.Context, objs ...string) error {
	_, err := c.Kubectl(ctx, append([]string{"delete", "--wait=true", "--timeout=5m", "--ignore-not-found"}, objs...)...)
	return err
}

// describeObj is kubectl describe of one object plus the plugin's
// recent log lines: what a user reads when something hangs.
func (c *Cluster) describeObj(ctx context.Context, obj string) string {
	out, _ := c.Kubectl(ctx, "describe", obj)
	logs, _ := c.Kubectl(ctx, "-n", "purerbd", "logs", "--all-containers", "--prefix", "--tail=30", "-l", "app.kubernetes.io/part-of=purerbd")
	return string(out) + "\n--- purerbd logs:\n" + string(logs)
}

// ImageOf returns the RBD image name behind a bound claim's volume (its
// CSI volume attributes name it).
func (c *Cluster) ImageOf(ctx context.Context, pv string) (string, error) {
	out, err := c.Kubectl(ctx, "get", "pv", pv, "-o", "jsonpath={.spec.csi.volumeAttributes.imageName}")
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(out))
	if name == "" {
		return "", fmt.Errorf("pv %s: no imageName attribute", pv)
	}
	return name, nil
}
