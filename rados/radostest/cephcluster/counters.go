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

// PlaceOSDsInHosts moves osd.i into a CRUSH host bucket named hosts[i]
// under root default (made when missing), for tests of CRUSH locality;
// the cluster's OSDs all run on this machine.
func (c *Cluster) PlaceOSDsInHosts(ctx context.Context, hosts ...string) error {
	for i, h := range hosts {
		for _, args := range [][]string{
			{"osd", "crush", "add-bucket", h, "host"},
			{"osd", "crush", "move", h, "root=default"},
			{"osd", "crush", "set", fmt.Sprintf("osd.%d", i), "1.0", "root=default", "host=" + h},
		} {
			if out, err := c.Ceph(ctx, args...); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
		}
	}
	return nil
}
