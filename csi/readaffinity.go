package csi

import "strings"

// CrushLocation is the node's CRUSH location made from its labels, as
// ceph-csi makes it for read affinity: for each of labels on the node,
// the part of the label's name after its prefix ("topology.kubernetes.io/zone"
// -> "zone"; "kubernetes.io/hostname" -> "host", Ceph's name for it)
// names the CRUSH type, and the label's value, with "." made "-" as
// CRUSH bucket names have them, the bucket. Nil when no label is there.
func CrushLocation(labels []string, nodeLabels map[string]string) map[string]string {
	loc := map[string]string{}
	for _, l := range labels {
		v, ok := nodeLabels[l]
		if !ok {
			continue
		}
		typ := strings.TrimSpace(l[strings.IndexByte(l, '/')+1:])
		if typ == "hostname" {
			typ = "host"
		}
		loc[typ] = strings.ReplaceAll(strings.TrimSpace(v), ".", "-")
	}
	if len(loc) == 0 {
		return nil
	}
	return loc
}
