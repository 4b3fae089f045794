package cephcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// PGMapStatus is the pgmap part of `ceph status --format json` (the
// manager's report).
type PGMapStatus struct {
	PGMap struct {
		NumPGs  int `json:"num_pgs"`
		ByState []struct {
			Name string `json:"state_name"`
			Num  int    `json:"count"`
		} `json:"pgs_by_state"`
	} `json:"pgmap"`
}

// Clean reports whether every placement group is active+clean.
func (s PGMapStatus) Clean() bool {
	for _, st := range s.PGMap.ByState {
		if st.Name == "active+clean" && st.Num == s.PGMap.NumPGs && st.Num > 0 {
			return true
		}
	}
	return false
}

// WaitClean waits until every placement group is active+clean, as the
// manager reports it (`ceph status`): the cluster needs WithMgr.
func (c *Cluster) WaitClean(ctx context.Context) error {
	var last []byte
	for {
		out, err := c.Ceph(ctx, "status", "--format", "json")
		if err == nil {
			last = out
			var st PGMapStatus
			if json.Unmarshal(out, &st) == nil && st.Clean() {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("placement groups not all active+clean: %s", last)
		case <-time.After(time.Second):
		}
	}
}
