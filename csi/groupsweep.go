package csi

import (
	"context"
	"errors"
)

// sweepGroups collects what interrupted CreateVolumeGroupSnapshot calls
// left in the driver's groups of a pool's namespace, calls the CO may
// never retry (a VolumeGroupSnapshot deleted before it had a handle): a
// group without a complete snapshot is removed, with an incomplete
// snapshot's member snapshots and its members' links, and its
// reservation dropped; a complete one's members are released. A group a
// call is working on (its operation lock held, by this or another
// replica) is left for the next sweep.
func (d *Driver) sweepGroups(ctx context.Context, s Session, cred Credentials, c Cluster, pool int64, ns string) error {
	names, err := s.ListGroups(ctx, pool, ns)
	if errors.Is(err, ErrNotFound) {
		return nil // namespace absent from this pool
	}
	if err != nil {
		return storeError(err, cred, "cluster %q pool %d: listing groups", c.ID, pool)
	}
	var firstErr error
	for _, name := range names {
		g := GroupRef{Pool: pool, Namespace: ns, Name: name}
		owned, err := ownedGroup(ctx, s, g)
		if err != nil {
			firstErr = keepFirst(firstErr, storeError(err, cred, "group %s", name))
			continue
		}
		if !owned {
			continue
		}
		release, err := d.lockGroup(ctx, s, c.ID, g)
		if err != nil {
			continue // busy: next time
		}
		err = d.sweepGroup(ctx, s, cred, g)
		release()
		firstErr = keepFirst(firstErr, err)
	}
	return firstErr
}

func (d *Driver) sweepGroup(ctx context.Context, s Session, cred Credentials, g GroupRef) error {
	gs, found, err := groupSnapshotOf(ctx, s, g)
	if err != nil {
		return storeError(err, cred, "group %s", g.Name)
	}
	if found && gs.Complete {
		return d.releaseMembers(ctx, s, cred, g)
	}
	d.log.Info("sweep: removing the group of an interrupted group snapshot", "group", g.Name)
	if err := d.dropGroup(ctx, s, g); err != nil {
		return storeError(err, cred, "removing group %s", g.Name)
	}
	return nil
}

// keepFirst keeps the first error.
func keepFirst(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// sweepGroupOf sweeps the group img is in, if it is the driver's and no
// call is working on it: a source left in the group of an interrupted
// group snapshot is free for the next one at once rather than after the
// next sweep. It reports whether it swept one.
func (d *Driver) sweepGroupOf(ctx context.Context, s Session, cred Credentials, cluster string, img ImageRef) bool {
	g, in, err := s.ImageGroup(ctx, img)
	if err != nil || !in {
		return false
	}
	if owned, err := ownedGroup(ctx, s, g); err != nil || !owned {
		return false
	}
	release, err := d.lockGroup(ctx, s, cluster, g)
	if err != nil {
		return false
	}
	defer release()
	if err := d.sweepGroup(ctx, s, cred, g); err != nil {
		d.log.Warn("sweeping the group of an interrupted group snapshot", "group", g.Name, "error", errorMessage(err))
		return false
	}
	return true
}
