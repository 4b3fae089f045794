package rados

import (
	"context"
	"fmt"
)

// EnableApplication tags pool with application app (rbd, rgw, cephfs),
// as `ceph osd pool application enable` does, and waits until this
// client's OSD map shows it. The monitors refuse (EPERM) a pool that
// already has another application unless force is set.
func (c *Conn) EnableApplication(ctx context.Context, pool, app string, force bool) error {
	cmd := map[string]any{"prefix": "osd pool application enable", "pool": pool, "app": app}
	if force {
		cmd["yes_i_really_mean_it"] = true
	}
	if _, err := c.monCommandJSON(ctx, cmd); err != nil {
		return fmt.Errorf("rados: enabling application %q on pool %q: %w", app, pool, err)
	}
	return c.WaitForLatestOSDMap(ctx)
}
