package rados

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/purerbd/purerbd/rados/denc"
)

// Reading and breaking the lock class's advisory locks (librados'
// rados_list_lockers, rados_break_lock and cls_lock's list_locks): the
// inputs and replies of its get_info, list_locks and break_lock methods.

// LockType is the lock class's ClsLockType.
type LockType uint8

// Lock types.
const (
	LockNone               LockType = 0
	LockExclusive          LockType = 1
	LockShared             LockType = 2
	LockExclusiveEphemeral LockType = 3
)

// String names the type as Ceph's cls_lock_type_str does.
func (t LockType) String() string {
	switch t {
	case LockNone:
		return "none"
	case LockExclusive:
		return "exclusive"
	case LockShared:
		return "shared"
	case LockExclusiveEphemeral:
		return "exclusive-ephemeral"
	}
	return "<unknown>"
}

// Locker is one holder of a lock.
type Locker struct {
	Entity      denc.EntityName
	Cookie      string
	Expiration  denc.UTime // zero: never
	Addr        denc.EntityAddr
	Description string
}

// LockInfo is a lock's holders, type and tag (cls_lock_get_info_reply).
type LockInfo struct {
	Lockers []Locker // sorted by entity, then cookie
	Type    LockType
	Tag     string
}

// GetLockInfoRequest is the input of the lock class's get_info method
// (cls_lock_get_info_op).
type GetLockInfoRequest struct{ Name string }

// Encode writes the request as the OSD's lock class reads it.
func (r GetLockInfoRequest) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) { e.String(r.Name) })
}

// BreakLockRequest is the input of the lock class's break_lock method
// (cls_lock_break_op): remove the lock a locker holds with a cookie.
type BreakLockRequest struct {
	Name   string
	Locker denc.EntityName
	Cookie string
}

// Encode writes the request as the OSD's lock class reads it.
func (r BreakLockRequest) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) { e.String(r.Name); r.Locker.Encode(e); e.String(r.Cookie) })
}

// Decode reads a cls_lock_get_info_reply.
func (l *LockInfo) Decode(d *denc.Decoder) {
	*l = LockInfo{}
	d.Versioned("cls_lock_get_info_reply", 1, func(d *denc.Decoder, _ uint8) {
		l.Lockers = denc.List(d, "lockers", 12, func(d *denc.Decoder) Locker {
			var k Locker
			d.Versioned("locker_id_t", 1, func(d *denc.Decoder, _ uint8) {
				k.Entity.Decode(d)
				k.Cookie = d.String("cookie")
			})
			d.Versioned("locker_info_t", 1, func(d *denc.Decoder, _ uint8) {
				k.Expiration.Decode(d)
				k.Addr.Decode(d)
				k.Description = d.String("description")
			})
			return k
		})
		l.Type = LockType(d.U8("lock_type"))
		l.Tag = d.String("tag")
	})
	sort.Slice(l.Lockers, func(i, j int) bool {
		a, b := l.Lockers[i], l.Lockers[j]
		if a.Entity != b.Entity {
			if a.Entity.Type != b.Entity.Type {
				return a.Entity.Type < b.Entity.Type
			}
			return a.Entity.Num < b.Entity.Num
		}
		return strings.Compare(a.Cookie, b.Cookie) < 0
	})
}

// Encode writes a cls_lock_get_info_reply (addresses in the modern
// encoding).
func (l LockInfo) Encode(e *denc.Encoder) {
	e.Versioned(1, 1, func(e *denc.Encoder) {
		denc.PutList(e, l.Lockers, func(e *denc.Encoder, k Locker) {
			e.Versioned(1, 1, func(e *denc.Encoder) { k.Entity.Encode(e); e.String(k.Cookie) })
			e.Versioned(1, 1, func(e *denc.Encoder) {
				k.Expiration.Encode(e)
				k.Addr.Encode(e)
				e.String(k.Description)
			})
		})
		e.U8(uint8(l.Type))
		e.String(l.Tag)
	})
}

// DecodeLockNames reads a cls_lock_list_locks_reply.
func DecodeLockNames(d *denc.Decoder) []string {
	var names []string
	d.Versioned("cls_lock_list_locks_reply", 1, func(d *denc.Decoder, _ uint8) {
		names = denc.List(d, "locks", 4, func(d *denc.Decoder) string { return d.String("lock name") })
	})
	return names
}

// decodeAll decodes out with f, which must use every byte.
func decodeAll(what string, out []byte, f func(d *denc.Decoder)) error {
	d := denc.NewDecoder(out)
	f(d)
	d.End(what)
	if err := d.Err(); err != nil {
		return fmt.Errorf("rados: %s: %w", what, err)
	}
	return nil
}

// LockInfo returns the holders, type and tag of lock name on oid; an
// object without that lock is ErrNotFound.
func (io *IOContext) LockInfo(ctx context.Context, oid, name string) (LockInfo, error) {
	e := denc.NewEncoder(nil)
	GetLockInfoRequest{Name: name}.Encode(e)
	out, err := io.Exec(ctx, oid, "lock", "get_info", e.Bytes())
	if err != nil {
		return LockInfo{}, fmt.Errorf("rados: lock info %q on %s: %w", name, oid, err)
	}
	var info LockInfo
	err = decodeAll("lock.get_info reply", out, info.Decode)
	return info, err
}

// ListLocks returns the names of the locks on oid.
func (io *IOContext) ListLocks(ctx context.Context, oid string) ([]string, error) {
	out, err := io.Exec(ctx, oid, "lock", "list_locks", nil)
	if err != nil {
		return nil, fmt.Errorf("rados: list locks on %s: %w", oid, err)
	}
	var names []string
	err = decodeAll("lock.list_locks reply", out, func(d *denc.Decoder) { names = DecodeLockNames(d) })
	return names, err
}

// Lock takes a lock as described by r (any type, tag and duration); a
// lock held by another locker is ErrBusy, one this locker holds (without
// the renew flag) ErrExists.
func (io *IOContext) Lock(ctx context.Context, oid string, r LockRequest) error {
	e := denc.NewEncoder(nil)
	r.Encode(e)
	if err := io.writeExec(ctx, oid, "lock", "lock", e.Bytes()); err != nil {
		return fmt.Errorf("rados: lock %q on %s: %w", r.Name, oid, err)
	}
	return nil
}

// BreakLock removes the lock name that locker holds on oid with cookie.
func (io *IOContext) BreakLock(ctx context.Context, oid, name string, locker denc.EntityName, cookie string) error {
	e := denc.NewEncoder(nil)
	BreakLockRequest{Name: name, Locker: locker, Cookie: cookie}.Encode(e)
	if err := io.writeExec(ctx, oid, "lock", "break_lock", e.Bytes()); err != nil {
		return fmt.Errorf("rados: break lock %q on %s: %w", name, oid, err)
	}
	return nil
}
