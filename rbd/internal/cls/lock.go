package cls

import (
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
)

// The `lock` class: advisory locks kept in an object's xattrs.

// LockType is ClsLockType.
type LockType = rados.LockType

// Lock types.
const (
	LockNone      = rados.LockNone
	LockExclusive = rados.LockExclusive
	LockShared    = rados.LockShared
)

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
	return lockMethod("break_lock", args(rados.BreakLockRequest{Name: name, Locker: locker, Cookie: cookie}.Encode))
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
	return lockMethod("get_info", args(rados.GetLockInfoRequest{Name: name}.Encode))
}

// ListLocks is lock.list_locks.
func ListLocks() Method { return lockMethod("list_locks", nil) }

// Locker is one holder of a lock.
type Locker = rados.Locker

// LockInfo is cls_lock_get_info_reply.
type LockInfo = rados.LockInfo

// DecodeGetInfo parses get_info's reply.
func DecodeGetInfo(out []byte) (info LockInfo, err error) {
	err = reply("lock.get_info", out, func(d *denc.Decoder) { info.Decode(d) })
	return
}

// DecodeListLocks parses list_locks' reply.
func DecodeListLocks(out []byte) (names []string, err error) {
	err = reply("lock.list_locks", out, func(d *denc.Decoder) {
		names = rados.DecodeLockNames(d)
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
