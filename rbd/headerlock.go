package rbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// Header locks: advisory exclusive locks of RADOS' `lock` class on an
// image's header object, under a name of the caller's choosing, for
// callers that must agree among themselves who owns an image (a CSI
// node plugin staging a volume for a single writer). Taking one is one
// atomic operation on the OSD. librbd, krbd and this package's own
// exclusive lock ("rbd_lock") never look at them, and `rbd lock ls`
// does not list them; `rados lock info rbd_header.<id> <name>` does.
// A header lock is held until it is unlocked or broken: it does not
// expire, and it outlives the client that took it, so callers decide
// when a holder is gone (HeaderLocker.HeldBy against Image.Watchers).

// HeaderLock names a header lock and what a holder records in it.
type HeaderLock struct {
	// Name is the lock's name; not "rbd_lock", the exclusive lock's.
	Name string
	// Cookie tells apart the holders one client may be (several opens
	// of one image); breaking a lock names it.
	Cookie string
	// Tag and Description are recorded with the lock, for people.
	Tag         string
	Description string
}

// HeaderLocker is a holder of a header lock, as the OSD recorded it when
// the lock was taken.
type HeaderLocker struct {
	Client      string // the client's entity, "client.4123"
	Cookie      string
	Address     string // the client's address, "10.0.0.1:0/2863412823"
	Tag         string // the lock's tag
	Description string
	// Expires is when the lock lapses; zero for never (header locks
	// taken by this package).
	Expires time.Time
}

// LockHeader takes the exclusive header lock l as this client (the
// image must be open for writing, as for UnlockHeader and
// BreakHeaderLock). It fails
// with ErrBusy when another holder (another client, or this one under
// another cookie) has it, and with ErrExists when this client holds it
// already under l.Cookie.
func (img *Image) LockHeader(ctx context.Context, l HeaderLock) error {
	if err := img.checkHeaderLock(l.Name); err != nil {
		return err
	}
	err := callWrite(ctx, img.meta, headerObject(img.id),
		cls.Lock(l.Name, cls.LockExclusive, l.Cookie, l.Tag, l.Description, denc.UTime{}, 0))
	switch {
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("%w: header lock %q of %q is held by another client: %w", ErrBusy, l.Name, img.name, err)
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("%w: header lock %q of %q is held by this client as %q: %w", ErrExists, l.Name, img.name, l.Cookie, err)
	case err != nil:
		return fmt.Errorf("rbd: taking header lock %q of %q: %w", l.Name, img.name, err)
	}
	return nil
}

// UnlockHeader releases the header lock name that this client holds
// under cookie (ErrNotFound when it does not).
func (img *Image) UnlockHeader(ctx context.Context, name, cookie string) error {
	if err := img.checkHeaderLock(name); err != nil {
		return err
	}
	err := callWrite(ctx, img.meta, headerObject(img.id), cls.Unlock(name, cookie))
	if errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w: header lock %q of %q held as %q: %w", ErrNotFound, name, img.name, cookie, err)
	}
	if err != nil {
		return fmt.Errorf("rbd: releasing header lock %q of %q: %w", name, img.name, err)
	}
	return nil
}

// BreakHeaderLock removes the hold of client ("client.4123") under cookie
// on the header lock name, whoever it is (ErrNotFound when that hold is
// gone already).
func (img *Image) BreakHeaderLock(ctx context.Context, name, client, cookie string) error {
	if err := img.checkHeaderLock(name); err != nil {
		return err
	}
	entity, err := denc.ParseEntityName(client)
	if err != nil {
		return fmt.Errorf("%w: locker %q: %w", ErrInvalid, client, err)
	}
	err = callWrite(ctx, img.meta, headerObject(img.id), cls.BreakLock(name, entity, cookie))
	if errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w: header lock %q of %q held by %s as %q: %w", ErrNotFound, name, img.name, client, cookie, err)
	}
	if err != nil {
		return fmt.Errorf("rbd: breaking header lock %q of %q held by %s: %w", name, img.name, client, err)
	}
	return nil
}

// HeaderLockers lists the holders of the header lock name (none when it
// is not held, or when the header is gone).
func (img *Image) HeaderLockers(ctx context.Context, name string) ([]HeaderLocker, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty header lock name", ErrInvalid)
	}
	out, err := call(ctx, img.meta, headerObject(img.id), cls.GetInfo(name))
	if errors.Is(err, syscall.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rbd: reading header lock %q of %q: %w", name, img.name, err)
	}
	info, err := cls.DecodeGetInfo(out)
	if err != nil {
		return nil, fmt.Errorf("rbd: header lock %q of %q: %w", name, img.name, err)
	}
	lockers := make([]HeaderLocker, 0, len(info.Lockers))
	for _, lk := range info.Lockers {
		hl := HeaderLocker{Client: lk.Entity.String(), Cookie: lk.Cookie, Address: lockerAddress(lk.Addr),
			Tag: info.Tag, Description: lk.Description}
		if !lk.Expiration.IsZero() {
			hl.Expires = lk.Expiration.Time()
		}
		lockers = append(lockers, hl)
	}
	return lockers, nil
}

// checkHeaderLock refuses to change header locks through a read-only
// image, and lock names that are not the caller's to use.
func (img *Image) checkHeaderLock(name string) error {
	if img.readOnly {
		return ErrReadOnly
	}
	if name == "" || name == lockName {
		return fmt.Errorf("%w: header lock name %q", ErrInvalid, name)
	}
	return nil
}

// lockerAddress prints a locker's address as `rbd lock ls` does, without
// the v1:/v2: prefix; "" for none.
func lockerAddress(a denc.EntityAddr) string {
	if a.IsZero() {
		return ""
	}
	a.Type = denc.AddrAny
	return a.String()
}

// HeldBy reports whether w, a watch on the image's header
// (Image.Watchers), is the client that holds lk: the same entity, or the
// same address (IP, port and nonce; the address type may be written
// differently). The address identifies the client for the life of its
// connection, as librbd recognises the owner of its lock, while the
// entity changes when the client authenticates anew.
func (lk HeaderLocker) HeldBy(w Watcher) bool {
	if w.Client == lk.Client {
		return true
	}
	if lk.Address == "" {
		return false
	}
	la, err := denc.ParseEntityAddr(lk.Address)
	if err != nil {
		return false
	}
	wa, err := denc.ParseEntityAddr(w.Address)
	return err == nil && wa.SameInstance(la)
}
