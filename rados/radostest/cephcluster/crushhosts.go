package cephcluster

import (
	"context"
	"fmt"
)

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
