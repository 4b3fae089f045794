package csi

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Topology-aware provisioning, as ceph-csi does it, so that its
// StorageClasses and node flags carry over unchanged:
//
//   - A node started with --domainlabels (node labels such as
//     topology.kubernetes.io/zone) reports, in NodeGetInfo, one segment per
//     label named "topology.<drivername>/<label name without its prefix>"
//     with the label's value; a label missing on the node is an error at
//     start-up, not a silently unconstrained node.
//   - A StorageClass's topologyConstrainedPools parameter lists pools with
//     the domain segments (label name without prefix, value) they serve.
//     CreateVolume takes the first preferred topology of the request that
//     some pool matches in every segment, then the requisite ones, and
//     creates the image in that pool (and its data pool); the volume is
//     accessible from the matched topology.
//   - A request without accessibility requirements (no node reports
//     topology) uses the class's pool parameter.

// topologyKeyPrefix returns the prefix of this driver's topology keys.
func topologyKeyPrefix(driverName string) string {
	return strings.ToLower("topology." + driverName)
}

// TopologyFromLabels returns the node's topology segments for the domain
// labels named (ceph-csi's --domainlabels, comma-separated) from the
// node's labels. Every named label must be on the node.
func TopologyFromLabels(domainLabels string, nodeLabels map[string]string, driverName string) (map[string]string, error) {
	if domainLabels == "" {
		return nil, nil
	}
	prefix := topologyKeyPrefix(driverName)
	if len(prefix) > 63 {
		return nil, fmt.Errorf("the topology key prefix %q for driver %q is longer than 63 characters", prefix, driverName)
	}
	seen := map[string]bool{}
	topo := map[string]string{}
	var missing []string
	for _, label := range strings.Split(domainLabels, ",") {
		if label == "" {
			return nil, fmt.Errorf("domain labels %q: an empty label name", domainLabels)
		}
		if seen[label] {
			return nil, fmt.Errorf("domain labels %q: %q is named twice", domainLabels, label)
		}
		seen[label] = true
		v, ok := nodeLabels[label]
		if !ok {
			missing = append(missing, label)
			continue
		}
		topo[prefix+"/"+domainName(label)] = v
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("the node has no label %s (named by the domain labels %q)", strings.Join(missing, ", "), domainLabels)
	}
	return topo, nil
}

// domainName is a label or topology key without its prefix: "zone" for
// "topology.kubernetes.io/zone".
func domainName(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// topologyPool is one entry of topologyConstrainedPools.
type topologyPool struct {
	PoolName       string            `json:"poolName"`
	DataPoolName   string            `json:"dataPool"`
	DomainSegments []topologySegment `json:"domainSegments"`
}

type topologySegment struct {
	DomainLabel string `json:"domainLabel"`
	DomainValue string `json:"value"`
}

// parseTopologyPools decodes and checks a topologyConstrainedPools value.
func parseTopologyPools(v string) ([]topologyPool, error) {
	var pools []topologyPool
	dec := json.NewDecoder(strings.NewReader(strings.ReplaceAll(v, "\n", " ")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pools); err != nil {
		return nil, fmt.Errorf("%s: not a JSON list of {\"poolName\", \"dataPool\", \"domainSegments\": [{\"domainLabel\", \"value\"}]}: %w", paramTopologyPools, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: text after the JSON list", paramTopologyPools)
	}
	if len(pools) == 0 {
		return nil, fmt.Errorf("%s: an empty list", paramTopologyPools)
	}
	for i, p := range pools {
		if p.PoolName == "" {
			return nil, fmt.Errorf("%s: entry %d has no poolName", paramTopologyPools, i)
		}
		for _, s := range p.DomainSegments {
			if s.DomainLabel == "" {
				return nil, fmt.Errorf("%s: pool %q has a segment without domainLabel", paramTopologyPools, p.PoolName)
			}
		}
	}
	return pools, nil
}

// poolForTopology picks the pool for a volume: the first preferred
// topology some pool serves, else the first requisite one; it returns
// the pool and the matched topology. ok is false when requirements name
// no topology at all (the class's pool applies).
func poolForTopology(pools []topologyPool, req *csi.TopologyRequirement) (p topologyPool, topo *csi.Topology, ok bool, err error) {
	if len(req.GetPreferred()) == 0 && len(req.GetRequisite()) == 0 {
		return topologyPool{}, nil, false, nil
	}
	for _, list := range [][]*csi.Topology{req.GetPreferred(), req.GetRequisite()} {
		for _, t := range list {
			if p, ok := matchTopology(pools, t); ok {
				return p, t, true, nil
			}
		}
	}
	return topologyPool{}, nil, false, fmt.Errorf("no pool of %s serves the topologies the volume may be in (preferred %v, requisite %v)",
		paramTopologyPools, segmentsOf(req.GetPreferred()), segmentsOf(req.GetRequisite()))
}

// matchTopology returns the first pool all of whose segments t has.
func matchTopology(pools []topologyPool, t *csi.Topology) (topologyPool, bool) {
	domains := map[string]string{}
	for k, v := range t.GetSegments() {
		domains[domainName(k)] = v
	}
	for _, p := range pools {
		match := true
		for _, s := range p.DomainSegments {
			if v, ok := domains[s.DomainLabel]; !ok || v != s.DomainValue {
				match = false
				break
			}
		}
		if match {
			return p, true
		}
	}
	return topologyPool{}, false
}

func segmentsOf(ts []*csi.Topology) []map[string]string {
	out := make([]map[string]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.GetSegments())
	}
	return out
}
