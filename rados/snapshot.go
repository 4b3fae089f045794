package rados

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/purerbd/purerbd/rados/osdc"
)

// PoolSnap is a pool snapshot.
type PoolSnap struct {
	ID      uint64
	Name    string
	Created time.Time
}

// CreateSnap takes a pool snapshot (`ceph osd pool mksnap`). Pools that
// use self-managed snapshots (RBD pools with image snapshots) refuse it.
func (io *IOContext) CreateSnap(ctx context.Context, name string) error {
	if _, err := io.conn.monCommandJSON(ctx, map[string]any{"prefix": "osd pool mksnap", "pool": io.poolName, "snap": name}); err != nil {
		return err
	}
	return io.conn.WaitForLatestOSDMap(ctx)
}

// RemoveSnap removes a pool snapshot.
func (io *IOContext) RemoveSnap(ctx context.Context, name string) error {
	if _, err := io.conn.monCommandJSON(ctx, map[string]any{"prefix": "osd pool rmsnap", "pool": io.poolName, "snap": name}); err != nil {
		return err
	}
	return io.conn.WaitForLatestOSDMap(ctx)
}

// ListSnaps returns the pool's snapshots, oldest first.
func (io *IOContext) ListSnaps() ([]PoolSnap, error) {
	p := io.conn.ob.Map().Pool(io.pool)
	if p == nil {
		return nil, fmt.Errorf("rados: pool %q: %w", io.poolName, ErrPoolNotFound)
	}
	out := make([]PoolSnap, 0, len(p.Snaps))
	for _, s := range p.Snaps {
		out = append(out, PoolSnap{ID: s.SnapID, Name: s.Name, Created: s.Stamp.Time()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// LookupSnap returns the id of a pool snapshot, for WithReadSnap.
func (io *IOContext) LookupSnap(name string) (uint64, error) {
	snaps, err := io.ListSnaps()
	if err != nil {
		return 0, err
	}
	for _, s := range snaps {
		if s.Name == name {
			return s.ID, nil
		}
	}
	return 0, fmt.Errorf("rados: pool %q has no snapshot %q: %w", io.poolName, name, ErrNotFound)
}

// Rollback restores an object to its state at a pool snapshot.
func (io *IOContext) Rollback(ctx context.Context, oid, snapName string) error {
	id, err := io.LookupSnap(snapName)
	if err != nil {
		return err
	}
	_, err = io.do(ctx, oid, osdc.FlagWrite, osdc.Rollback(id))
	return err
}
