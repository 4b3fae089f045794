package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e"
)

func init() {
	scenarios = append(scenarios, scenario{"metrics", metricsScraped})
}

// scrape fetches a Prometheus text endpoint from inside the test's
// network namespace and returns the samples: series (name{labels}) to
// value.
func scrape(ctx context.Context, c *e2e.Cluster, url string) (map[string]float64, error) {
	out, err := c.NS.Command(ctx, "wget", "-q", "-T", "10", "-O", "-", url).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v: %s", url, err, out)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		samples[line[:i]] = v
	}
	return samples, nil
}

// sumOf adds the samples of a metric whose labels contain every one of
// the given label pairs (`key="value"`).
func sumOf(samples map[string]float64, name string, labels ...string) float64 {
	var sum float64
	for k, v := range samples {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(k, l)
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// metricsScraped: the shipped metrics endpoints answer where the
// manifests say (the node plugin on the host's :9810, purerbd-csi
// controller :9090 and the sidecars' :8080-:8082 in its pod), and the
// figures move as a workload does: the bytes a pod writes to a claim
// show up as the volume's written bytes, its stage and the CreateVolume
// as calls with code OK.
func metricsScraped(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	must(t, c.Apply(ctx, e2e.PVC{Name: "mx", Size: "128Mi"}.Manifest()))
	pv, err := c.WaitPVCBound(ctx, "mx", 3*time.Minute)
	must(t, err)
	out, err := c.Kubectl(ctx, "get", "pv", pv, "-o", "jsonpath={.spec.csi.volumeHandle}")
	must(t, err)
	volID := strings.TrimSpace(string(out))
	node := "http://" + c.NodeIP + ":9810/metrics"
	_, err = c.RunPod(ctx, e2e.Pod{Name: "mx-w", Claim: "mx", Command: []string{"/bin/workload", "write",
		"--path", "/data/records", "--count", fmt.Sprint(recCount), "--size", fmt.Sprint(recSize), "--seed", "51"}}, 5*time.Minute)
	must(t, err)
	// the claim stays staged until the pod is gone: scrape now
	m, err := scrape(ctx, c, node)
	must(t, err)
	vol := `volume_id="` + volID + `"`
	written := sumOf(m, "purerbd_volume_written_bytes_total", vol)
	if written < recCount*recSize {
		t.Fatalf("node metrics: %v bytes written to %s, want at least the %d the pod wrote", written, volID, recCount*recSize)
	}
	if sumOf(m, "purerbd_volume_info", vol) != 1 {
		t.Fatalf("node metrics: no purerbd_volume_info for the staged %s", volID)
	}
	stages := sumOf(m, "purerbd_csi_calls_total", `method="/csi.v1.Node/NodeStageVolume"`, `code="OK"`)
	if stages < 1 {
		t.Fatalf("node metrics: NodeStageVolume OK counted %v times", stages)
	}
	must(t, c.Delete(ctx, "pod/mx-w", "pvc/mx"))

	out, err = c.Kubectl(ctx, "-n", "purerbd", "get", "pod", "-l", "app.kubernetes.io/component=controller", "-o", "jsonpath={.items[0].status.podIP}")
	must(t, err)
	ip := strings.TrimSpace(string(out))
	if ip == "" {
		t.Fatal("no controller pod IP")
	}
	cm, err := scrape(ctx, c, "http://"+ip+":9090/metrics")
	must(t, err)
	creates := sumOf(cm, "purerbd_csi_calls_total", `method="/csi.v1.Controller/CreateVolume"`, `code="OK"`)
	if creates < 1 {
		t.Fatalf("controller metrics: CreateVolume OK counted %v times", creates)
	}
	if sumOf(cm, "purerbd_ceph_mon_session_up") < 1 {
		t.Fatal("controller metrics: no Ceph monitor session up")
	}
	var sidecars []string
	for _, port := range []string{"8080", "8081", "8082"} {
		sm, err := scrape(ctx, c, "http://"+ip+":"+port+"/metrics")
		must(t, err)
		sidecars = append(sidecars, fmt.Sprintf(":%s %d series", port, len(sm)))
	}
	return fmt.Sprintf("node: %.0f bytes written to the claim (pod wrote %d), %v NodeStage OK; controller: %v CreateVolume OK, mon session up; sidecars %s",
		written, recCount*recSize, stages, creates, strings.Join(sidecars, ", "))
}
