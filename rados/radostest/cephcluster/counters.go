package cephcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
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

// WaitClean waits until every placement group is active+clean, as the
// manager reports it (`ceph status`): the cluster needs WithMgr.
func (c *Cluster) WaitClean(ctx context.Context) error {
	var last []byte
	for {
		out, err := c.Ceph(ctx, "status", "--format", "json")
		if err == nil {
			last = out
			var st struct {
				PGMap struct {
					NumPGs  int `json:"num_pgs"`
					ByState []struct {
						Name string `json:"state_name"`
						Num  int    `json:"count"`
					} `json:"pgs_by_state"`
				} `json:"pgmap"`
			}
			if json.Unmarshal(out, &st) == nil {
				for _, s := range st.PGMap.ByState {
					if s.Name == "active+clean" && s.Num == st.PGMap.NumPGs && s.Num > 0 {
						return nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("placement groups not all active+clean: %s", last)
		case <-time.After(time.Second):
		}
	}
}
