package csi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// clusterEntry is one element of the cluster configuration file, which
// has the shape of ceph-csi's config.json so one ConfigMap serves both:
//
//	[{"clusterID": "...", "monitors": ["10.0.0.1:3300", ...],
//	  "rbd": {"radosNamespace": "..."}}]
//
// rbd's netNamespaceFilePath is the network namespace the node plugin
// reaches the cluster from; readAffinity localizes the node's reads.
// Keys purerbd does not use (cephFS, nfs, rbd's mirrorDaemonCount) are
// accepted and ignored.
type clusterEntry struct {
	ClusterID    string   `json:"clusterID"`
	Monitors     []string `json:"monitors"`
	ReadAffinity struct {
		Enabled             bool     `json:"enabled"`
		CrushLocationLabels []string `json:"crushLocationLabels"`
	} `json:"readAffinity"`
	RBD struct {
		RadosNamespace       string `json:"radosNamespace"`
		NetNamespaceFilePath string `json:"netNamespaceFilePath"`
	} `json:"rbd"`
}

// Clusters is the parsed cluster configuration.
type Clusters []Cluster

// LoadClusters reads a cluster configuration file.
func LoadClusters(path string) (Clusters, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster config: %w", err)
	}
	cs, err := ParseClusters(b)
	if err != nil {
		return nil, fmt.Errorf("cluster config %s: %w", path, err)
	}
	return cs, nil
}

// ParseClusters parses the JSON of a cluster configuration file.
func ParseClusters(b []byte) (Clusters, error) {
	var entries []clusterEntry
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&entries); err != nil {
		return nil, fmt.Errorf("not a JSON list of clusters: %w", err)
	}
	seen := map[string]bool{}
	cs := make(Clusters, 0, len(entries))
	for i, e := range entries {
		if err := checkField("clusterID", e.ClusterID, false); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if seen[e.ClusterID] {
			return nil, fmt.Errorf("entry %d: clusterID %q appears twice", i, e.ClusterID)
		}
		seen[e.ClusterID] = true
		if len(e.Monitors) == 0 {
			return nil, fmt.Errorf("cluster %q has no monitors", e.ClusterID)
		}
		if err := checkField("radosNamespace", e.RBD.RadosNamespace, true); err != nil {
			return nil, fmt.Errorf("cluster %q: %w", e.ClusterID, err)
		}
		if p := e.RBD.NetNamespaceFilePath; p != "" && !filepath.IsAbs(p) {
			return nil, fmt.Errorf("cluster %q: netNamespaceFilePath %q is not an absolute path", e.ClusterID, p)
		}
		cs = append(cs, Cluster{ID: e.ClusterID, Monitors: e.Monitors, Namespace: e.RBD.RadosNamespace,
			NetNamespace: e.RBD.NetNamespaceFilePath,
			ReadAffinity: e.ReadAffinity.Enabled, CrushLocationLabels: e.ReadAffinity.CrushLocationLabels})
	}
	return cs, nil
}

// Find returns the cluster with the given ID.
func (cs Clusters) Find(id string) (Cluster, bool) {
	for _, c := range cs {
		if c.ID == id {
			return c, true
		}
	}
	return Cluster{}, false
}
