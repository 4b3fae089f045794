package rbd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/objectmap"
)

// objectMap is the head object map of an image whose exclusive lock this
// client holds: loaded into memory, its object locked (lock "rbd_lock",
// empty cookie, as librbd does), and every change written to the cluster
// (guarded by assert_locked) before it is applied in memory.
type objectMap struct {
	img *Image
	oid string

	mu sync.Mutex
	bv *objectmap.BitVector
}

func openObjectMap(ctx context.Context, img *Image, h *header) (*objectMap, error) {
	m := &objectMap{img: img, oid: objectMapObject(img.id, noSnap)}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	out, err := call(ctx, img.meta, m.oid, cls.ObjectMapLoad())
	if err != nil {
		m.unlock(ctx)
		return nil, fmt.Errorf("rbd: loading object map %s: %w", m.oid, err)
	}
	bv, err := cls.DecodeObjectMapLoad(out)
	if err != nil {
		m.unlock(ctx)
		return nil, fmt.Errorf("rbd: object map %s: %w", m.oid, err)
	}
	m.bv = bv
	want := h.layout.NumObjects(h.size)
	switch {
	case bv.Len() < want:
		m.unlock(ctx)
		return nil, fmt.Errorf("rbd: object map %s holds %d objects, the image has %d; rebuild it with `rbd object-map rebuild`",
			m.oid, bv.Len(), want)
	case bv.Len() > want:
		if err := m.resize(ctx, want); err != nil {
			m.unlock(ctx)
			return nil, err
		}
	}
	return m, nil
}

// lock takes the object map's lock, breaking a stale one left by a
// previous lock owner (which librbd does too: holding the image lock
// entitles to the map).
func (m *objectMap) lock(ctx context.Context) error {
	o := m.img.meta
	for attempt := 0; ; attempt++ {
		err := callWrite(ctx, o, m.oid, cls.Lock(lockName, cls.LockExclusive, "", "", "", denc.UTime{}, 0))
		if err == nil || errors.Is(err, syscall.EEXIST) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || attempt > 3 {
			return fmt.Errorf("rbd: locking object map %s: %w", m.oid, err)
		}
		out, err := call(ctx, o, m.oid, cls.GetInfo(lockName))
		if err != nil {
			return fmt.Errorf("rbd: reading object map lock %s: %w", m.oid, err)
		}
		info, err := cls.DecodeGetInfo(out)
		if err != nil {
			return err
		}
		for _, lk := range info.Lockers {
			err := callWrite(ctx, o, m.oid, cls.BreakLock(lockName, lk.Entity, lk.Cookie))
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("rbd: breaking object map lock %s: %w", m.oid, err)
			}
		}
	}
}

func (m *objectMap) unlock(ctx context.Context) {
	err := callWrite(ctx, m.img.meta, m.oid, cls.Unlock(lockName, ""))
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		m.img.log.Warn("unlocking object map", "oid", m.oid, "err", err)
	}
}

func (m *objectMap) close(ctx context.Context) error {
	m.unlock(ctx)
	return nil
}

// get returns object i's state.
func (m *objectMap) get(i uint64) uint8 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bv.Get(i)
}

// update sets objects [start, end) to state (only those in *current when
// current is not nil): on disk first, then in memory.
func (m *objectMap) update(ctx context.Context, start, end uint64, state uint8, current *uint8) error {
	err := m.img.meta.write(ctx, m.oid, denc.SnapContext{},
		newWrite(cls.AssertLocked(lockName, cls.LockExclusive, "", ""), cls.ObjectMapUpdate(start, end, state, current)))
	if err != nil {
		return fmt.Errorf("rbd: updating object map %s [%d,%d) to %s: %w", m.oid, start, end, objectmap.StateName(state), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := start; i < end && i < m.bv.Len(); i++ {
		if current == nil || m.bv.Get(i) == *current {
			m.bv.Set(i, state)
		}
	}
	return nil
}

// ensure sets object i to state unless it is in it already.
func (m *objectMap) ensure(ctx context.Context, i uint64, state uint8) error {
	if m.get(i) == state {
		return nil
	}
	return m.update(ctx, i, i+1, state, nil)
}

// resize changes the number of objects (new ones nonexistent).
func (m *objectMap) resize(ctx context.Context, n uint64) error {
	err := m.img.meta.write(ctx, m.oid, denc.SnapContext{},
		newWrite(cls.AssertLocked(lockName, cls.LockExclusive, "", ""), cls.ObjectMapResize(n, objectmap.Nonexistent)))
	if err != nil {
		return fmt.Errorf("rbd: resizing object map %s to %d objects: %w", m.oid, n, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bv.Resize(n)
	return nil
}

// snapshot copies the head map into the new snapshot's map object and,
// with fast-diff, marks the head's existing objects clean.
func (m *objectMap) snapshot(ctx context.Context, snap uint64, fastDiff bool) error {
	o := m.img.meta
	out, err := call(ctx, o, m.oid, cls.ObjectMapLoad())
	if err != nil {
		return fmt.Errorf("rbd: loading object map %s: %w", m.oid, err)
	}
	bv, err := cls.DecodeObjectMapLoad(out)
	if err != nil {
		return err
	}
	snapOID := objectMapObject(m.img.id, snap)
	w := rados.NewWriteOp()
	w.WriteFull(bv.Marshal())
	if err := o.write(ctx, snapOID, denc.SnapContext{}, w); err != nil {
		return fmt.Errorf("rbd: writing object map %s: %w", snapOID, err)
	}
	if !fastDiff {
		return nil
	}
	err = o.write(ctx, m.oid, denc.SnapContext{},
		newWrite(cls.AssertLocked(lockName, cls.LockExclusive, "", ""), cls.ObjectMapSnapAdd()))
	if err != nil {
		return fmt.Errorf("rbd: object_map_snap_add on %s: %w", m.oid, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := uint64(0); i < m.bv.Len(); i++ {
		if m.bv.Get(i) == objectmap.Exists {
			m.bv.Set(i, objectmap.ExistsClean)
		}
	}
	return nil
}

// reload re-reads the map from the cluster (after a rollback rewrote it).
func (m *objectMap) reload(ctx context.Context) error {
	out, err := call(ctx, m.img.meta, m.oid, cls.ObjectMapLoad())
	if err != nil {
		return err
	}
	bv, err := cls.DecodeObjectMapLoad(out)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.bv = bv
	m.mu.Unlock()
	return nil
}
