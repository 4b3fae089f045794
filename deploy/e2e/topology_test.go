package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e"
)

func init() {
	scenarios = append(scenarios, scenario{"topology", topologyPools})
}

// topologyPools: the node plugin started with --domainlabels reports the
// node's zone label as its topology, and a class with ceph-csi's
// topologyConstrainedPools puts a WaitForFirstConsumer claim in the pool
// of that zone, with the zone's node affinity on the volume. The node
// plugin is put back as shipped afterwards.
func topologyPools(ctx context.Context, t *testing.T, c *e2e.Cluster) string {
	const (
		label = "topology.kubernetes.io/zone"
		key   = "topology.rbd.purerbd.io/zone"
	)
	_, err := c.Kubectl(ctx, "label", "node", c.Node, label+"=z2", "--overwrite")
	must(t, err)
	_, err = c.Kubectl(ctx, "-n", "purerbd", "patch", "daemonset/purerbd-csi-node", "--type=json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--domainlabels=`+label+`"}]`)
	must(t, err)
	defer func() {
		if _, err := c.Kubectl(ctx, "-n", "purerbd", "rollout", "undo", "daemonset/purerbd-csi-node"); err != nil {
			t.Errorf("putting the node plugin back: %v", err)
		}
		if _, err := c.Kubectl(ctx, "-n", "purerbd", "rollout", "status", "daemonset/purerbd-csi-node", "--timeout=10m"); err != nil {
			t.Errorf("putting the node plugin back: %v", err)
		}
	}()
	_, err = c.Kubectl(ctx, "-n", "purerbd", "rollout", "status", "daemonset/purerbd-csi-node", "--timeout=10m")
	must(t, err)
	// the kubelet learns the topology key when the plugin registers anew
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, _ := c.Kubectl(ctx, "get", "csinode", c.Node, "-o", `jsonpath={.spec.drivers[?(@.name=="rbd.purerbd.io")].topologyKeys}`)
		if strings.Contains(string(out), key) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CSINode %s: topology keys %q, want %s", c.Node, out, key)
		}
		time.Sleep(2 * time.Second)
	}
	out, err := c.Kubectl(ctx, "get", "node", c.Node, "-o", "jsonpath={.metadata.labels."+strings.ReplaceAll(key, ".", `\.`)+"}")
	must(t, err)
	if got := strings.TrimSpace(string(out)); got != "z2" {
		t.Fatalf("node label %s = %q, want z2", key, got)
	}

	b, err := c.Kubectl(ctx, "get", "storageclass", "purerbd", "-o", "json")
	must(t, err)
	var sc map[string]any
	must(t, json.Unmarshal(b, &sc))
	params := sc["parameters"].(map[string]any)
	delete(params, "pool")
	params["topologyConstrainedPools"] = fmt.Sprintf(`[{"poolName":%q,"domainSegments":[{"domainLabel":"zone","value":"z1"}]},
{"poolName":%q,"domainSegments":[{"domainLabel":"zone","value":"z2"}]}]`, c.Pool, c.ZonePool)
	sc["metadata"] = map[string]any{"name": "purerbd-topology"}
	sc["volumeBindingMode"] = "WaitForFirstConsumer"
	b, err = json.Marshal(sc)
	must(t, err)
	must(t, c.Apply(ctx, string(b)))

	must(t, c.Apply(ctx, e2e.PVC{Name: "topo", Size: "128Mi", StorageClass: "purerbd-topology"}.Manifest()))
	writeRecords(ctx, t, c, "topo-w", "topo", 41) // the claim binds when the pod is scheduled
	pv, err := c.WaitPVCBound(ctx, "topo", time.Minute)
	must(t, err)
	b, err = c.Kubectl(ctx, "get", "pv", pv, "-o", "json")
	must(t, err)
	var obj struct {
		Spec struct {
			CSI struct {
				VolumeAttributes map[string]string `json:"volumeAttributes"`
			} `json:"csi"`
			NodeAffinity struct {
				Required struct {
					NodeSelectorTerms []struct {
						MatchExpressions []struct {
							Key    string   `json:"key"`
							Values []string `json:"values"`
						} `json:"matchExpressions"`
					} `json:"nodeSelectorTerms"`
				} `json:"required"`
			} `json:"nodeAffinity"`
		} `json:"spec"`
	}
	must(t, json.Unmarshal(b, &obj))
	if p := obj.Spec.CSI.VolumeAttributes["pool"]; p != c.ZonePool {
		t.Fatalf("the volume is in pool %q, want the z2 pool %q", p, c.ZonePool)
	}
	affinity := false
	for _, term := range obj.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			affinity = affinity || (e.Key == key && slices.Equal(e.Values, []string{"z2"}))
		}
	}
	if !affinity {
		t.Fatalf("PV %s has no node affinity %s=z2: %s", pv, key, b)
	}
	img := obj.Spec.CSI.VolumeAttributes["imageName"]
	b, err = c.Ceph.Rbd(ctx, "ls", "--format", "json", c.ZonePool)
	must(t, err)
	var names []string
	must(t, json.Unmarshal(b, &names))
	if !slices.Contains(names, img) {
		t.Fatalf("image %s not in pool %s: %v", img, c.ZonePool, names)
	}
	verifyRecords(ctx, t, c, "topo-r", "topo", 41, false)
	must(t, c.Delete(ctx, "pvc/topo"))
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(2 * time.Second) {
		b, err := c.Ceph.Rbd(ctx, "ls", "--format", "json", c.ZonePool)
		must(t, err)
		names = nil
		must(t, json.Unmarshal(b, &names))
		if !slices.Contains(names, img) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("image %s still in pool %s after the claim was deleted", img, c.ZonePool)
		}
	}
	return fmt.Sprintf("node topology %s=z2 from --domainlabels; the claim went to pool %s with node affinity z2; records verified; image removed", key, c.ZonePool)
}
