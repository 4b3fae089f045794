package cephcluster

import (
	"context"
	"encoding/json"
	"fmt"
)

// OSDOpReads returns each OSD's op_r counter (reads it served, `ceph
// tell osd.N perf dump osd`), indexed by OSD id.
func (c *Cluster) OSDOpReads(ctx context.Context) ([]int64, error) {
	r := make([]int64, c.Options.OSDs)
	for i := range r {
		out, err := c.Ceph(ctx, "tell", fmt.Sprintf("osd.%d", i), "perf", "dump", "osd")
		if err != nil {
			return nil, err
		}
		var d struct {
			OSD struct {
				OpR int64 `json:"op_r"`
			} `json:"osd"`
		}
		if err := json.Unmarshal(out, &d); err != nil {
			return nil, fmt.Errorf("perf dump of osd.%d: %w", i, err)
		}
		r[i] = d.OSD.OpR
	}
	return r, nil
}
