package rbd

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

// The image lock of `rbd lock add/ls/rm` (librbd's lock_exclusive,
// lock_shared, list_lockers and break_lock): the cls lock "rbd_lock" on
// the header, the one the exclusive-lock feature takes with cookie
// "auto <n>". Taken by hand it is advisory: a user's mark that an image
// is in use, which librbd's (and this package's) exclusive lock respects
// as a lock held elsewhere.

// AddLock takes the image lock as this client with cookie id:
// exclusively, or shared with the holders that give the same tag.
// ErrBusy when another holder has it (or holds it shared under another
// tag), ErrExists when this client holds it as id already.
func (img *Image) AddLock(ctx context.Context, id, tag string, shared bool) error {
	if id == "" {
		return fmt.Errorf("%w: empty lock id", ErrInvalid)
	}
	typ := cls.LockExclusive
	if shared {
		typ = cls.LockShared
	}
	err := callWrite(ctx, img.meta, headerObject(img.id), cls.Lock(lockName, typ, id, tag, "", denc.UTime{}, 0))
	switch {
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("%w: the lock of %q is held by someone else: %w", ErrBusy, img.name, err)
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("%w: the lock of %q is held by this client as %q: %w", ErrExists, img.name, id, err)
	case err != nil:
		return fmt.Errorf("rbd: locking %q: %w", img.name, err)
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// RemoveLock breaks the hold of client ("client.4123") with cookie id on
// the image lock, as rbd lock rm does: the holder's address is
// blocklisted first, so that a holder still alive cannot go on writing.
// ErrNotFound when client holds no lock on the image.
func (img *Image) RemoveLock(ctx context.Context, client, id string) error {
	entity, err := denc.ParseEntityName(client)
	if err != nil {
		return fmt.Errorf("%w: locker %q: %w", ErrInvalid, client, err)
	}
	out, err := call(ctx, img.meta, headerObject(img.id), cls.GetInfo(lockName))
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("rbd: reading the lock of %q: %w", img.name, err)
	}
	var info cls.LockInfo
	if err == nil {
		if info, err = cls.DecodeGetInfo(out); err != nil {
			return err
		}
	}
	found := false
	for _, lk := range info.Lockers {
		if lk.Entity == entity {
			if err := img.meta.blocklist(ctx, lk.Addr); err != nil {
				return err
			}
			found = true
			break
		}
	}
	if !found {
		return fmt.Errorf("%w: %s holds no lock on %q", ErrNotFound, client, img.name)
	}
	err = callWrite(ctx, img.meta, headerObject(img.id), cls.BreakLock(lockName, entity, id))
	if errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w: %s holds no lock %q on %q", ErrNotFound, client, id, img.name)
	}
	if err != nil {
		return fmt.Errorf("rbd: breaking the lock of %q held by %s: %w", img.name, client, err)
	}
	img.notifyHeaderUpdate(ctx)
	return nil
}

// LockShared reports whether the image lock is held shared, and its tag
// (the type and tag rbd lock ls shows).
func (img *Image) LockShared(ctx context.Context) (shared bool, tag string, err error) {
	out, err := call(ctx, img.meta, headerObject(img.id), cls.GetInfo(lockName))
	if errors.Is(err, syscall.ENOENT) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("rbd: reading the lock of %q: %w", img.name, err)
	}
	info, err := cls.DecodeGetInfo(out)
	if err != nil {
		return false, "", err
	}
	return info.Type == cls.LockShared, info.Tag, nil
}
