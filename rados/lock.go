package rados

import (
	"context"
	"fmt"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
)

// Advisory locks on objects (librados' rados_lock_exclusive and
// rados_unlock; the OSD's `lock` object class keeps them in the object's
// xattrs, creating the object if needed). A lock is held by a client
// (its entity and address) with a cookie; a duration makes it expire
// unless renewed, so that a dead holder's lock does not last.

// LockOptions shape a lock.
type LockOptions struct {
	// Duration > 0 makes the lock expire after that long.
	Duration time.Duration
	// Renew lets the same client and cookie take a lock they hold again
	// (to extend its duration).
	Renew bool
	// Ephemeral removes the object when its last locker unlocks (Ceph's
	// exclusive-ephemeral lock type, Octopus and later): a lock object of
	// its own that leaves nothing behind. The object must hold no data.
	Ephemeral bool
}

// LockRequest is the input of the lock class's `lock` method
// (cls_lock_lock_op).
type LockRequest struct {
	Name        string
	Type        uint8 // 1 exclusive, 2 shared, 3 exclusive-ephemeral
	Cookie      string
	Tag         string
	Description string
	Duration    denc.UTime // zero: never expires
	Flags       uint8      // 1: LOCK_FLAG_MAY_RENEW
}

// Encode writes the request as the OSD's lock class reads it.
func (r LockRequest) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) {
		e.String(r.Name)
		e.U8(r.Type)
		e.String(r.Cookie)
		e.String(r.Tag)
		e.String(r.Description)
		r.Duration.Encode(e)
		e.U8(r.Flags)
	})
}

// UnlockRequest is the input of the lock class's `unlock` method
// (cls_lock_unlock_op).
type UnlockRequest struct {
	Name, Cookie string
}

// Encode writes the request as the OSD's lock class reads it.
func (r UnlockRequest) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) {
		e.String(r.Name)
		e.String(r.Cookie)
	})
}

// LockExclusive takes the exclusive lock name on object oid with
// cookie. A lock held by another client or cookie is ErrBusy; one
// already held by this one, without Renew, is ErrExists.
func (io *IOContext) LockExclusive(ctx context.Context, oid, name, cookie, description string, o LockOptions) error {
	r := LockRequest{Name: name, Type: 1, Cookie: cookie, Description: description,
		Duration: denc.UTime{Sec: uint32(o.Duration / time.Second), Nsec: uint32(o.Duration % time.Second)}}
	if o.Renew {
		r.Flags = 1
	}
	if o.Ephemeral {
		r.Type = 3
	}
	e := denc.NewEncoder(nil)
	r.Encode(e)
	if err := io.writeExec(ctx, oid, "lock", "lock", e.Bytes()); err != nil {
		return fmt.Errorf("rados: lock %q on %s: %w", name, oid, err)
	}
	return nil
}

// Unlock releases the lock name on oid held with cookie; one not held
// (expired, or broken) is ErrNotFound.
func (io *IOContext) Unlock(ctx context.Context, oid, name, cookie string) error {
	e := denc.NewEncoder(nil)
	UnlockRequest{Name: name, Cookie: cookie}.Encode(e)
	if err := io.writeExec(ctx, oid, "lock", "unlock", e.Bytes()); err != nil {
		return fmt.Errorf("rados: unlock %q on %s: %w", name, oid, err)
	}
	return nil
}

// writeExec runs a class method that writes, as librados sends the lock
// class's methods (an ObjectWriteOperation): ordered with the object's
// other writes.
func (io *IOContext) writeExec(ctx context.Context, oid, class, method string, in []byte) error {
	w := NewWriteOp()
	step := w.Exec(class, method, in)
	if err := io.OperateWrite(ctx, oid, w); err != nil {
		return err
	}
	return step.Err
}
