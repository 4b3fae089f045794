package rbd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rbd/internal/cls"
	"github.com/purerbd/purerbd/rbd/watchnotify"
)

// exclusiveLock is librbd's managed exclusive lock: the `lock` class lock
// "rbd_lock" on the header, exclusive, cookie "auto <watch handle>", tag
// "internal". While it is held the object map (if any) is loaded and
// locked too.
type exclusiveLock struct {
	img *Image

	mu        sync.Mutex // serialises acquire, release and cookie changes
	owned     atomic.Bool
	cookie    string
	cookieMu  sync.Mutex
	curCookie string // cookie, readable without mu
	omap      atomic.Pointer[objectMap]
	// mapOptional lets an acquisition go on without the object map when
	// it is flagged invalid or does not load: set while the map is
	// checked or rebuilt (objectmaprepair.go).
	mapOptional atomic.Bool

	releasing  atomic.Bool
	acquiredAt atomic.Int64 // unix nanoseconds of the last acquisition
	// acquisitions and releases count lock transitions (tests, stats).
	acquisitions atomic.Int64
	releases     atomic.Int64
	handovers    atomic.Int64 // releases at a peer's request
	closing      chan struct{}
	closeOnce    sync.Once

	wakeMu sync.Mutex
	wake   chan struct{} // closed when a peer releases the lock
}

func newExclusiveLock(img *Image) *exclusiveLock {
	return &exclusiveLock{img: img, closing: make(chan struct{}), wake: make(chan struct{})}
}

func (l *exclusiveLock) isOwner() bool { return l.owned.Load() }

// objectMap returns the loaded object map (nil without the feature or
// when the lock is not held).
func (l *exclusiveLock) objectMap() *objectMap { return l.omap.Load() }

func (l *exclusiveLock) wakeChan() chan struct{} {
	l.wakeMu.Lock()
	defer l.wakeMu.Unlock()
	return l.wake
}

// peerReleased wakes acquirers waiting for the owner to let go.
func (l *exclusiveLock) peerReleased() {
	l.wakeMu.Lock()
	close(l.wake)
	l.wake = make(chan struct{})
	l.wakeMu.Unlock()
}

var errLockRetry = errors.New("retry")

// minLockHold is how long a newly acquired lock is kept before a peer's
// request is honoured.
const minLockHold = 100 * time.Millisecond

// acquire takes the lock, asking its current owner to release it if a
// live librbd-compatible client holds it, and breaking it if its owner is
// gone.
func (l *exclusiveLock) acquire(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.owned.Load() {
		return nil
	}
	img := l.img
	oid := headerObject(img.id)
	wait := 50 * time.Millisecond
	for {
		select {
		case <-l.closing:
			return ErrClosed
		default:
		}
		cookie := lockCookie(img.watchHandle())
		wake := l.wakeChan()
		err := callWrite(ctx, img.meta, oid, cls.Lock(lockName, cls.LockExclusive, cookie, lockTag, "", denc.UTime{}, 0))
		if err == nil || errors.Is(err, syscall.EEXIST) {
			return l.postAcquire(ctx, cookie)
		}
		if !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("rbd: taking the exclusive lock of %q: %w", img.name, err)
		}
		err = l.handleBusy(ctx, oid)
		if err == nil {
			continue // the lock was broken: try again at once
		}
		if !errors.Is(err, errLockRetry) {
			return err
		}
		select {
		case <-wake:
			wait = 50 * time.Millisecond
		case <-time.After(wait):
			wait = min(2*wait, time.Second)
		case <-ctx.Done():
			return ctx.Err()
		case <-l.closing:
			return ErrClosed
		}
	}
}

// handleBusy deals with a lock held by someone else. It returns nil when
// the lock was broken (retry at once), errLockRetry after asking a live
// owner for it (wait, then retry), or a final error.
func (l *exclusiveLock) handleBusy(ctx context.Context, oid string) error {
	img := l.img
	out, err := call(ctx, img.meta, oid, cls.GetInfo(lockName))
	if err != nil {
		return fmt.Errorf("rbd: reading the lock of %q: %w", img.name, err)
	}
	info, err := cls.DecodeGetInfo(out)
	if err != nil {
		return err
	}
	if len(info.Lockers) == 0 {
		return nil
	}
	lk := info.Lockers[0]
	handle, ok := parseLockCookie(lk.Cookie)
	if info.Tag != lockTag || info.Type != cls.LockExclusive || !ok {
		return fmt.Errorf("%w: %q is locked by %s (cookie %q, tag %q)", ErrLockedExternally, img.name, lk.Entity, lk.Cookie, info.Tag)
	}
	fenced := img.fenced(ctx, lk.Addr)
	alive := false
	if !fenced {
		watchers, err := img.meta.listWatchers(ctx, oid)
		if err != nil {
			return fmt.Errorf("rbd: listing watchers of %q: %w", img.name, err)
		}
		for _, w := range watchers {
			if lockerWatches(lk, w, handle) {
				alive = true
			}
		}
	}
	if fenced || !alive {
		img.log.Info("breaking the exclusive lock of a dead client", "owner", lk.Entity.String(), "cookie", lk.Cookie,
			"addr", lk.Addr.String(), "fenced_by_caller", fenced)
		if !fenced && !img.opts.NoBlocklist && !lk.Addr.IsZero() {
			if err := img.meta.blocklist(ctx, lk.Addr); err != nil {
				return err
			}
		}
		err := callWrite(ctx, img.meta, oid, cls.BreakLock(lockName, lk.Entity, lk.Cookie))
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rbd: breaking the lock of %q held by %s: %w", img.name, lk.Entity, err)
		}
		return nil
	}
	replies, err := img.notifyHeader(ctx, watchnotify.NotifyMessage{Op: watchnotify.OpRequestLock, Client: img.clientID()})
	if err != nil && !errors.Is(err, syscall.ETIMEDOUT) {
		img.log.Warn("lock request notification failed", "err", err)
	}
	for _, r := range replies {
		if len(r.Reply) == 0 {
			continue
		}
		resp, err := watchnotify.ParseResponse(r.Reply)
		if err != nil {
			continue
		}
		if resp.Result == -int32(syscall.EROFS) {
			return fmt.Errorf("%w: the lock owner %s of %q will not release it", ErrBusy, lk.Entity, img.name)
		}
	}
	return errLockRetry
}

// postAcquire loads what the lock protects and announces the new owner.
func (l *exclusiveLock) postAcquire(ctx context.Context, cookie string) error {
	img := l.img
	l.setCookie(cookie)
	if err := img.refresh(ctx); err != nil {
		l.unlockHeader(ctx)
		return err
	}
	h := img.hdr.Load()
	if h.features&FeatureObjectMap != 0 {
		om, err := l.loadObjectMap(ctx, h)
		switch {
		case err != nil && l.mapOptional.Load():
			img.log.Debug("acquiring without the object map", "err", err)
		case err != nil:
			l.unlockHeader(ctx)
			return err
		default:
			l.omap.Store(om)
		}
	}
	l.acquiredAt.Store(time.Now().UnixNano())
	l.owned.Store(true)
	l.acquisitions.Add(1)
	img.log.Debug("acquired exclusive lock", "cookie", cookie)
	if _, err := img.notifyHeader(ctx, watchnotify.NotifyMessage{Op: watchnotify.OpAcquiredLock, Client: img.clientID()}); err != nil {
		img.log.Debug("acquired-lock notification", "err", err)
	}
	return nil
}

// loadObjectMap opens the head's object map for the new owner; one
// flagged invalid is refused.
func (l *exclusiveLock) loadObjectMap(ctx context.Context, h *header) (*objectMap, error) {
	if h.flags&FlagObjectMapInvalid != 0 {
		return nil, fmt.Errorf("rbd: image %q: object map is flagged invalid; rebuild it with `rbd object-map rebuild`", l.img.name)
	}
	return openObjectMap(ctx, l.img, h)
}

func (l *exclusiveLock) unlockHeader(ctx context.Context) {
	if err := l.unlockOwn(ctx); err != nil {
		l.img.log.Warn("releasing the header lock failed", "err", err)
	}
}

// fenced reports whether addr is one of the client instances the caller
// proved dead and blocklisted (OpenOptions.FencedClients, and what
// OpenOptions.Fencing returns once it is done).
func (img *Image) fenced(ctx context.Context, addr denc.EntityAddr) bool {
	if addr.IsZero() {
		return false
	}
	same := func(f denc.EntityAddr) bool { return f.SameInstance(addr) }
	if slices.ContainsFunc(img.opts.FencedClients, same) {
		return true
	}
	if img.opts.Fencing == nil {
		return false
	}
	fenced, err := img.opts.Fencing(ctx)
	if err != nil {
		// the fencing reported it; this runs on each retry of the lock
		img.log.Debug("fencing dead clients", "err", err)
	}
	return slices.ContainsFunc(fenced, same)
}

// lockerWatches reports whether watcher w is the live owner of a lock
// held by lk with the watch handle of its cookie. As librbd does, it
// matches the locker's address and the watch cookie: both survive a
// client's re-authentication under a new global id, its entity name does
// not. The name decides only where an address is missing.
func lockerWatches(lk cls.Locker, w watcherInfo, handle uint64) bool {
	if w.Cookie != handle {
		return false
	}
	if !lk.Addr.IsZero() && !w.Addr.IsZero() {
		return lk.Addr.SameInstance(w.Addr)
	}
	return w.Entity == lk.Entity
}

// unlockOwn releases the header lock this image holds. The OSD files a
// lock under the entity name that took it; after re-authenticating under
// a new global id the client cannot unlock it in its own name (ENOENT),
// and a lock left behind would make the next owner think this live
// client dead and blocklist it. So a lock with this image's cookie held
// at this client's address under another name is broken instead.
func (l *exclusiveLock) unlockOwn(ctx context.Context) error {
	img := l.img
	oid := headerObject(img.id)
	err := callWrite(ctx, img.meta, oid, cls.Unlock(lockName, l.cookie))
	if !errors.Is(err, syscall.ENOENT) {
		return err
	}
	out, err := call(ctx, img.meta, oid, cls.GetInfo(lockName))
	if err != nil {
		return fmt.Errorf("reading the lock: %w", err)
	}
	info, err := cls.DecodeGetInfo(out)
	if err != nil {
		return err
	}
	watchers, err := img.meta.listWatchers(ctx, oid)
	if err != nil {
		return fmt.Errorf("listing watchers: %w", err)
	}
	own := img.watchHandle()
	for _, lk := range info.Lockers {
		if lk.Cookie != l.cookie {
			continue
		}
		for _, w := range watchers {
			if w.Cookie != own || !lk.Addr.SameInstance(w.Addr) {
				continue
			}
			img.log.Info("releasing the exclusive lock taken under an earlier global id", "owner", lk.Entity.String(), "cookie", lk.Cookie)
			err := callWrite(ctx, img.meta, oid, cls.BreakLock(lockName, lk.Entity, lk.Cookie))
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				return err
			}
		}
	}
	return nil
}

// release waits for writes in flight, closes the object map, unlocks and
// tells the other clients.
func (l *exclusiveLock) release(ctx context.Context) error {
	return l.releaseAs(ctx, false)
}

// releaseAs releases the lock, counting a handover when a peer asked
// for it; the count is up before the peer can take the lock.
func (l *exclusiveLock) releaseAs(ctx context.Context, handover bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.owned.Load() {
		return nil
	}
	img := l.img
	img.ioGate.Lock()
	defer img.ioGate.Unlock()
	var errs []error
	if om := l.omap.Swap(nil); om != nil {
		if err := om.close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if handover {
		l.handovers.Add(1)
	}
	if err := l.unlockOwn(ctx); err != nil {
		errs = append(errs, fmt.Errorf("rbd: releasing the exclusive lock of %q: %w", img.name, err))
	}
	l.owned.Store(false)
	l.releases.Add(1)
	img.log.Debug("released exclusive lock")
	if _, err := img.notifyHeader(ctx, watchnotify.NotifyMessage{Op: watchnotify.OpReleasedLock, Client: img.clientID()}); err != nil {
		img.log.Debug("released-lock notification", "err", err)
	}
	return errors.Join(errs...)
}

// handleRequest answers a peer's REQUEST_LOCK (from the notify callback,
// so it must not block).
func (l *exclusiveLock) handleRequest(m watchnotify.NotifyMessage) []byte {
	if !l.owned.Load() {
		return nil
	}
	if l.img.opts.LockPolicy == LockRefuse {
		return watchnotify.ResponseMessage{Result: -int32(syscall.EROFS)}.Marshal()
	}
	if l.releasing.CompareAndSwap(false, true) {
		go func() {
			defer l.releasing.Store(false)
			// hold a freshly taken lock a moment, so that the writes
			// that asked for it get through before it changes hands
			// again (two writers would otherwise hand it back and forth
			// without progress)
			if wait := minLockHold - time.Since(time.Unix(0, l.acquiredAt.Load())); wait > 0 {
				time.Sleep(wait)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l.img.log.Info("releasing the exclusive lock on request", "requester", m.Client.String())
			if err := l.releaseAs(ctx, true); err != nil {
				l.img.log.Warn("releasing the exclusive lock", "err", err)
			}
		}()
	}
	return watchnotify.ResponseMessage{Result: 0}.Marshal()
}

// rewatched moves a held lock to the new watch handle's cookie.
func (l *exclusiveLock) rewatched(handle uint64) {
	go func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.owned.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		newCookie := lockCookie(handle)
		err := callWrite(ctx, l.img.meta, headerObject(l.img.id),
			cls.SetCookie(lockName, cls.LockExclusive, l.cookie, lockTag, newCookie))
		if err != nil {
			// Typically a new global id: the OSD filed the lock under
			// the old name. Give it up rather than leave it behind, or
			// the next client would find this live one dead and
			// blocklist it; a later write acquires it again.
			l.img.log.Warn("exclusive lock lost after the header watch was re-established", "err", err)
			if err := l.unlockOwn(ctx); err != nil {
				l.img.log.Warn("releasing the exclusive lock left under the old watch", "err", err)
			}
			l.omap.Store(nil)
			l.owned.Store(false)
			l.img.notifyHeader(ctx, watchnotify.NotifyMessage{Op: watchnotify.OpReleasedLock, Client: l.img.clientID()})
			return
		}
		l.setCookie(newCookie)
	}()
}

// shutdown stops acquisitions and releases the lock.
func (l *exclusiveLock) shutdown(ctx context.Context) error {
	l.closeOnce.Do(func() { close(l.closing) })
	return l.release(ctx)
}

// Lock takes the exclusive lock now (it is otherwise taken at the first
// write). Images without the exclusive-lock feature return nil.
func (img *Image) Lock(ctx context.Context) error {
	if img.lock == nil {
		if img.readOnly {
			return ErrReadOnly
		}
		return nil
	}
	return img.lock.acquire(ctx)
}

// Unlock releases the exclusive lock if held.
func (img *Image) Unlock(ctx context.Context) error {
	if img.lock == nil {
		return nil
	}
	return img.lock.release(ctx)
}

// IsLockOwner reports whether this image holds the exclusive lock.
func (img *Image) IsLockOwner() bool { return img.lock != nil && img.lock.isOwner() }

// LockStats counts what the image's exclusive lock went through since
// the image was opened.
type LockStats struct {
	Enabled      bool  // the image takes the exclusive lock (feature on, not read-only)
	Owner        bool  // this client holds the lock now
	Acquisitions int64 // times it was taken
	Releases     int64 // times it was released, for any reason
	Handovers    int64 // releases at another client's request
}

// LockStats returns the exclusive lock's counters; all zero for an image
// without the exclusive-lock feature or opened read-only.
func (img *Image) LockStats() LockStats {
	l := img.lock
	if l == nil {
		return LockStats{}
	}
	return LockStats{Enabled: true, Owner: l.isOwner(), Acquisitions: l.acquisitions.Load(), Releases: l.releases.Load(), Handovers: l.handovers.Load()}
}

func (l *exclusiveLock) setCookie(c string) {
	l.cookie = c
	l.cookieMu.Lock()
	l.curCookie = c
	l.cookieMu.Unlock()
}

// assertCall is the class method call that fails a header update (with
// EBUSY) unless this client still holds the lock, as librbd adds to its
// header changes.
func (l *exclusiveLock) assertCall() cls.Method {
	l.cookieMu.Lock()
	c := l.curCookie
	l.cookieMu.Unlock()
	return cls.AssertLocked(lockName, cls.LockExclusive, c, lockTag)
}

// exclusive runs f while holding the exclusive lock (if the image has
// one) with no write in flight; f gets the class method calls that
// header updates start with, asserting the lock.
func (img *Image) exclusive(ctx context.Context, f func(ctx context.Context, guard []cls.Method) error) error {
	if img.readOnly {
		return ErrReadOnly
	}
	for {
		if img.lock != nil {
			if err := img.lock.acquire(ctx); err != nil {
				return err
			}
		}
		img.ioGate.Lock()
		if img.lock != nil && !img.lock.isOwner() {
			img.ioGate.Unlock()
			continue
		}
		var guard []cls.Method
		if img.lock != nil {
			guard = []cls.Method{img.lock.assertCall()}
		}
		err := img.refresh(ctx)
		if err == nil {
			err = f(ctx, guard)
		}
		img.ioGate.Unlock()
		return err
	}
}

// LockOwner is a holder of an image's exclusive lock as `rbd lock ls`
// shows it.
type LockOwner struct {
	Client  string // "client.4123"
	Cookie  string // "auto 94294" for librbd-managed locks
	Address string
	Tag     string
	Managed bool // taken by librbd or purerbd (tag "internal", cookie "auto <n>")
}

// LockOwners lists who holds the image's lock (cls lock "rbd_lock").
func (img *Image) LockOwners(ctx context.Context) ([]LockOwner, error) {
	out, err := call(ctx, img.meta, headerObject(img.id), cls.GetInfo(lockName))
	if errors.Is(err, syscall.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rbd: reading the lock of %q: %w", img.name, err)
	}
	info, err := cls.DecodeGetInfo(out)
	if err != nil {
		return nil, err
	}
	var owners []LockOwner
	for _, lk := range info.Lockers {
		_, auto := parseLockCookie(lk.Cookie)
		addr := lk.Addr
		addr.Type = denc.AddrAny // printed as rbd does, without the v1:/v2: prefix
		owners = append(owners, LockOwner{Client: lk.Entity.String(), Cookie: lk.Cookie, Address: addr.String(),
			Tag: info.Tag, Managed: auto && info.Tag == lockTag})
	}
	return owners, nil
}

// Watcher is a client watching the image's header (`rbd status`).
type Watcher struct {
	Client  string // "client.4123"
	Cookie  uint64
	Address string
}

// Watchers lists the clients that have the image open.
func (img *Image) Watchers(ctx context.Context) ([]Watcher, error) {
	ws, err := img.meta.listWatchers(ctx, headerObject(img.id))
	if err != nil {
		return nil, fmt.Errorf("rbd: listing watchers of %q: %w", img.name, err)
	}
	out := make([]Watcher, 0, len(ws))
	for _, w := range ws {
		out = append(out, Watcher{Client: w.Entity.String(), Cookie: w.Cookie, Address: w.Addr.String()})
	}
	return out, nil
}
