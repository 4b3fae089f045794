package cls

import (
	"sort"
	"strings"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
)

// The `lock` class: advisory locks kept in an object's xattrs.

// LockType is ClsLockType.
type LockType uint8

// Lock types.
const (
	LockNone      LockType = 0
	LockExclusive LockType = 1
	LockShared    LockType = 2
)

func (t LockType) String() string {
	switch t {
	case LockNone:
		return "none"
	case LockExclusive:
		return "exclusive"
	case LockShared:
		return "shared"
	}
	return "<unknown>"
}

// LockFlagMayRenew lets the same locker take a lock it already holds
// (LOCK_FLAG_MAY_RENEW).
const LockFlagMayRenew uint8 = 1

func lockMethod(name string, in []byte) Method { return Method{Class: "lock", Name: name, In: in} }

// Lock is lock.lock.
func Lock(name string, typ LockType, cookie, tag, description string, duration denc.UTime, flags uint8) Method {
	return lockMethod("lock", args(rados.LockRequest{Name: name, Type: uint8(typ), Cookie: cookie, Tag: tag,
		Description: description, Duration: duration, Flags: flags}.Encode))
}

// Unlock is lock.unlock.
func Unlock(name, cookie string) Method {
	return lockMethod("unlock", args(rados.UnlockRequest{Name: name, Cookie: cookie}.Encode))
}

// BreakLock is lock.break_lock: remove another client's lock.
func BreakLock(name string, locker denc.EntityName, cookie string) Method {
	return lockMethod("break_lock", args(func(e *denc.Encoder) {
		e.Versioned(1, 1, func(e *denc.Encoder) { e.String(name); locker.Encode(e); e.String(cookie) })
	}))
}

// AssertLocked is lock.assert_locked: fail the operation (with EBUSY)
// unless the caller holds the lock with this cookie and tag.
func AssertLocked(name string, typ LockType, cookie, tag string) Method {
	return lockMethod("assert_locked", args(func(e *denc.Encoder) {
		e.Versioned(1, 1, func(e *denc.Encoder) {
			e.String(name)
			e.U8(uint8(typ))
			e.String(cookie)
			e.String(tag)
		})
	}))
}

// GetInfo is lock.get_info.
func GetInfo(name string) Method {
	return lockMethod("get_info", args(func(e *denc.Encoder) {
		e.Versioned(1, 1, func(e *denc.Encoder) { e.String(name) })
	}))
}

// ListLocks is lock.list_locks.
func ListLocks() Method { return lockMethod("list_locks", nil) }

// Locker is one holder of a lock.
type Locker struct {
	Entity      denc.EntityName
	Cookie      string
	Expiration  denc.UTime
	Addr        denc.EntityAddr
	Description string
}

// LockInfo is cls_lock_get_info_reply.
type LockInfo struct {
	Lockers []Locker // sorted by entity, then cookie
	Type    LockType
	Tag     string
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

// DecodeGetInfo parses get_info's reply.
func DecodeGetInfo(out []byte) (info LockInfo, err error) {
	err = reply("lock.get_info", out, func(d *denc.Decoder) { info.Decode(d) })
	return
}

// DecodeListLocks parses list_locks' reply.
func DecodeListLocks(out []byte) (names []string, err error) {
	err = reply("lock.list_locks", out, func(d *denc.Decoder) {
		d.Versioned("cls_lock_list_locks_reply", 1, func(d *denc.Decoder, _ uint8) {
			names = denc.List(d, "locks", 4, str)
		})
	})
	return
}

// SetCookie is lock.set_cookie: change the cookie of a lock the caller
// holds (after its watch was re-established with a new handle).
func SetCookie(name string, typ LockType, cookie, tag, newCookie string) Method {
	return lockMethod("set_cookie", args(func(e *denc.Encoder) {
		e.Versioned(1, 1, func(e *denc.Encoder) {
			e.String(name)
			e.U8(uint8(typ))
			e.String(cookie)
			e.String(tag)
			e.String(newCookie)
		})
	}))
}
