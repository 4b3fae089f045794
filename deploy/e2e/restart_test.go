package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e"
)

func init() {
	scenarios = append(scenarios,
		scenario{"restart-rollout", func(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
			return restartUnderWrite(ctx, t, c, "rollout")
		}},
		scenario{"restart-sigkill", func(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
			return restartUnderWrite(ctx, t, c, "sigkill")
		}},
		scenario{"restart-delete-pod", func(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
			return restartUnderWrite(ctx, t, c, "delete")
		}},
	)
}

// streamResult is the writer's last line (workload stream).
type streamResult struct {
	Writes     int64   `json:"writes"`
	Errors     int64   `json:"errors"`
	MaxStallMS float64 `json:"max_stall_ms"`
	LastIndex  int64   `json:"last_index"`
}

// restartUnderWrite: a pod writes (synced records, without pause) on an
// ext4 volume while the node plugin is restarted the way an operator or
// the cluster does it; the pod must see no I/O error, every record must
// read back, the file system must be clean in `rbd export`. The longest
// stall of a single write is the figure.
func restartUnderWrite(ctx context.Context, t *testing.T, c *e2e.Cluster, how string) string {
	name := "rs-" + how
	must(t, c.Apply(ctx, e2e.PVC{Name: name, Size: "256Mi"}.Manifest()))
	pv, err := c.WaitPVCBound(ctx, name, 3*time.Minute)
	must(t, err)
	image, err := c.ImageOf(ctx, pv)
	must(t, err)
	work := []string{"--path", "/data/stream", "--size", "4096"}
	writer := e2e.Pod{Name: name + "-w", Claim: name,
		Command: append([]string{"/bin/workload", "stream", "--interval", "20ms"}, work...)}
	must(t, c.Apply(ctx, writer.Manifest()))
	must(t, c.WaitPodRunning(ctx, writer.Name, 5*time.Minute))
	time.Sleep(10 * time.Second)

	before, err := nodePluginPod(ctx, c)
	must(t, err)
	var vol string
	var writtenBefore float64
	if how == "sigkill" {
		// the node plugin's metrics move as the pod writes
		vol = volumeHandle(ctx, t, c, pv)
		writtenBefore = volumeWritesGrow(ctx, t, c, before, vol)
	}
	td := time.Now()
	switch how {
	case "rollout":
		_, err = c.Kubectl(ctx, "-n", "purerbd", "rollout", "restart", "daemonset/purerbd-csi-node")
		must(t, err)
		_, err = c.Kubectl(ctx, "-n", "purerbd", "rollout", "status", "daemonset/purerbd-csi-node", "--timeout=10m")
		must(t, err)
	case "sigkill":
		restarts := containerRestarts(ctx, t, c, before)
		out, err := c.RunPod(ctx, killerPod(name+"-kill"), 3*time.Minute)
		must(t, err)
		if n := strings.Count(out, "killed"); n != 1 {
			t.Fatalf("the killer killed %d node plugin processes, want 1: %s", n, out)
		}
		must(t, c.Delete(ctx, "pod/"+name+"-kill"))
		deadline := time.Now().Add(5 * time.Minute)
		for containerRestarts(ctx, t, c, before) == restarts {
			if time.Now().After(deadline) {
				t.Fatalf("the kubelet did not restart the killed plugin container")
			}
			time.Sleep(time.Second)
		}
	case "delete":
		_, err = c.Kubectl(ctx, "-n", "purerbd", "delete", "pod", before, "--wait=true", "--timeout=5m")
		must(t, err)
	}
	_, err = c.Kubectl(ctx, "-n", "purerbd", "rollout", "status", "daemonset/purerbd-csi-node", "--timeout=10m")
	must(t, err)
	after, err := nodePluginPod(ctx, c)
	must(t, err)
	if _, err := c.Kubectl(ctx, "-n", "purerbd", "wait", "--for=condition=Ready", "--timeout=5m", "pod/"+after); err != nil {
		t.Fatal(err)
	}
	back := time.Since(td)
	// writes go on after the new plugin took over
	time.Sleep(15 * time.Second)
	// the writer (PID 1) ends on TERM and its container with it, which
	// may kill the exec that sent the signal on its way out (exit code
	// 137): the signal was delivered, and waitStreamResult says whether
	// the writer finished
	if _, err := c.Kubectl(ctx, "exec", writer.Name, "--", "/bin/kill", "-TERM", "1"); err != nil && !strings.Contains(err.Error(), "exit code 137") {
		t.Fatal(err)
	}
	metrics := ""
	if how == "sigkill" {
		metrics = "; " + metricsAfterTakeover(ctx, t, c, after, vol, writtenBefore)
	}
	res := waitStreamResult(ctx, t, c, writer.Name)
	if res.Errors != 0 {
		t.Errorf("the writing pod saw %d I/O errors in %d writes (longest stall %.0f ms)", res.Errors, res.Writes, res.MaxStallMS)
	}
	must(t, c.Delete(ctx, "pod/"+writer.Name))
	out, err := c.RunPod(ctx, e2e.Pod{Name: name + "-v", Claim: name,
		Command: append([]string{"/bin/workload", "verify-stream", "--last-index", fmt.Sprint(res.LastIndex)}, work...)}, 5*time.Minute)
	if err != nil {
		t.Fatalf("verify after the restart: %v", err)
	}
	t.Logf("verify: %s", out)
	must(t, c.Delete(ctx, "pod/"+name+"-v"))

	exp := filepath.Join(t.TempDir(), "export")
	_, err = c.Ceph.Rbd(ctx, "export", c.Pool+"/"+image, exp)
	must(t, err)
	if out, err := exec.Command("e2fsck", "-fn", exp).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn of the export: %v\n%s", err, out)
	}
	must(t, c.Delete(ctx, "pvc/"+name))
	return fmt.Sprintf("plugin pod %s → %s back in %v; writer: %d synced writes, %d errors, longest stall %.0f ms; records verified, e2fsck -fn clean%s",
		before, after, back.Round(time.Millisecond), res.Writes, res.Errors, res.MaxStallMS, metrics)
}

// nodeMetricsPort is the node plugin's --metrics-address port in
// deploy/kubernetes/node.yaml.
const nodeMetricsPort = 9810

// volumeHandle is a PersistentVolume's CSI volume ID.
func volumeHandle(ctx context.Context, t *testing.T, c *e2e.Cluster, pv string) string {
	out, err := c.Kubectl(ctx, "get", "pv", pv, "-o", "jsonpath={.spec.csi.volumeHandle}")
	must(t, err)
	return strings.TrimSpace(string(out))
}

// volumeWritesGrow scrapes the node plugin twice, three seconds apart,
// while a pod writes to vol: the volume's written bytes must be there
// and grow. It returns the second figure.
func volumeWritesGrow(ctx context.Context, t *testing.T, c *e2e.Cluster, pod, vol string) float64 {
	id := map[string]string{"volume_id": vol}
	first, err := c.Scrape(ctx, "purerbd", pod, nodeMetricsPort)
	must(t, err)
	w1, ok := first.Sum("purerbd_volume_written_bytes_total", id)
	if !ok {
		t.Fatalf("the node plugin's metrics have no purerbd_volume_written_bytes_total for the staged volume %s", vol)
	}
	time.Sleep(3 * time.Second)
	second, err := c.Scrape(ctx, "purerbd", pod, nodeMetricsPort)
	must(t, err)
	w2, _ := second.Sum("purerbd_volume_written_bytes_total", id)
	if w2 <= w1 {
		t.Fatalf("purerbd_volume_written_bytes_total of %s did not grow while the pod wrote: %.0f then %.0f", vol, w1, w2)
	}
	if n, _ := second.Sum("purerbd_volume_requests_total", map[string]string{"volume_id": vol, "op": "write"}); n <= 0 {
		t.Fatalf("purerbd_volume_requests_total{op=write} of %s is %v while the pod writes", vol, n)
	}
	return w2
}

// metricsAfterTakeover checks the restarted plugin's metrics: the
// takeover of the volume's device counted as a reattach and a stall,
// and the writes after it counted afresh.
func metricsAfterTakeover(ctx context.Context, t *testing.T, c *e2e.Cluster, pod, vol string, writtenBefore float64) string {
	s, err := c.Scrape(ctx, "purerbd", pod, nodeMetricsPort)
	must(t, err)
	id := map[string]string{"volume_id": vol}
	re, _ := s.Sum("purerbd_volume_reattaches_total", map[string]string{"volume_id": vol, "reason": "takeover"})
	stalls, _ := s.Sum("purerbd_volume_stalls_total", id)
	written, _ := s.Sum("purerbd_volume_written_bytes_total", id)
	if re < 1 {
		t.Errorf("purerbd_volume_reattaches_total{reason=takeover} of %s is %v after the restart, want 1", vol, re)
	}
	if stalls < 1 {
		t.Errorf("purerbd_volume_stalls_total of %s is %v after the restart, want at least 1", vol, stalls)
	}
	if written <= 0 {
		t.Errorf("purerbd_volume_written_bytes_total of %s is %v in the restarted plugin while the pod writes", vol, written)
	}
	return fmt.Sprintf("metrics: %.0f KiB written before the kill, after it reattaches{takeover}=%.0f stalls=%.0f and %.0f KiB written since",
		writtenBefore/1024, re, stalls, written/1024)
}

// nodePluginPod is the name of the node plugin's pod.
func nodePluginPod(ctx context.Context, c *e2e.Cluster) (string, error) {
	for i := 0; i < 60; i++ {
		out, err := c.Kubectl(ctx, "-n", "purerbd", "get", "pods", "-l", "app.kubernetes.io/component=node",
			"--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}")
		if err != nil {
			return "", err
		}
		if f := strings.Fields(string(out)); len(f) == 1 {
			return f[0], nil
		}
		time.Sleep(time.Second)
	}
	return "", fmt.Errorf("no single running node plugin pod")
}

func containerRestarts(ctx context.Context, t *testing.T, c *e2e.Cluster, pod string) string {
	out, err := c.Kubectl(ctx, "-n", "purerbd", "get", "pod", pod, "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
	must(t, err)
	return strings.TrimSpace(string(out))
}

// killerPod SIGKILLs the node plugin's process from the host's PID
// namespace, as the OOM killer or a crash would end it.
func killerPod(name string) e2e.Pod {
	return e2e.Pod{Name: name, Command: []string{"/bin/sh", "-c",
		`for p in $(pidof purerbd-csi); do if tr '\0' ' ' </proc/$p/cmdline | grep -q -- ' --node '; then kill -9 $p && echo killed $p; fi; done`},
		HostPID: true}
}

// waitStreamResult waits for the writer to end and parses its last line.
func waitStreamResult(ctx context.Context, t *testing.T, c *e2e.Cluster, pod string) streamResult {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		out, _ := c.Kubectl(ctx, "get", "pod", pod, "-o", "jsonpath={.status.phase}")
		if p := strings.TrimSpace(string(out)); p == "Succeeded" || p == "Failed" {
			break
		}
		time.Sleep(time.Second)
	}
	logs, err := c.Kubectl(ctx, "logs", pod)
	must(t, err)
	lines := strings.Split(strings.TrimSpace(string(logs)), "\n")
	var res streamResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("the writer's last line is not its summary: %v\n%s", err, logs)
	}
	return res
}
