package rbd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
)

// LockPolicy says what an Image holding the exclusive lock does when
// another client asks for it.
type LockPolicy int

const (
	// LockCooperative hands the lock over when asked, as librbd does by
	// default, and takes it back (asking in turn) at the next write.
	LockCooperative LockPolicy = iota
	// LockRefuse keeps the lock once taken and answers requests with
	// EROFS (rbd-nbd --exclusive): other writers fail instead of
	// interleaving with this one.
	LockRefuse
)

// OpenOptions tune Open.
type OpenOptions struct {
	// ReadOnly opens without writing anything (no lock, no watch side
	// effects beyond the header watch).
	ReadOnly bool
	// Snapshot opens the image as of the named snapshot (read-only).
	Snapshot string
	// LockPolicy applies with the exclusive-lock feature.
	LockPolicy LockPolicy
	// AcquireLock takes the exclusive lock at Open instead of at the
	// first write.
	AcquireLock bool
	// NoBlocklist breaks the lock of a dead owner without blocklisting
	// it first (librbd's rbd_blocklist_on_break_lock = false). By
	// default the owner is blocklisted, so that a client that only lost
	// its watch cannot keep writing.
	NoBlocklist bool
	// FencedClients are client instances the caller has proven dead and
	// already blocklisted (rados.Conn.Blocklist): the previous process
	// of a restarted service, whose addresses it recorded. An exclusive
	// lock one of them holds is broken at once, where otherwise a locker
	// that still watches the header counts as alive until its watch
	// times out on the OSD (osd_client_watch_timeout, 30 s by default).
	// Matched by address, nonce included (denc.EntityAddr.SameInstance).
	FencedClients []denc.EntityAddr
	// Fencing, when set, is a fencing of dead client instances still
	// under way as the image opens (predecessor.Claim.AdoptAsync): before
	// an exclusive lock held by someone else is broken or waited for, the
	// image waits for it and counts the instances it returns as
	// FencedClients. An error leaves them out (the fencing reports it):
	// their locks break the slow way.
	Fencing func(context.Context) ([]denc.EntityAddr, error)
	// WriteAround turns on librbd's write-around cache (off by default;
	// see WriteAround).
	WriteAround WriteAround
	// NoWriteMerge sends every write as it comes. By default a write
	// that continues one still in flight into the same object waits for
	// it and goes together with the others lined up behind it, as one
	// OSD write, and a write the write-around cache acknowledged waits
	// behind the newest write in flight into its object wherever it
	// lies in it (librbd's simple I/O scheduler; rbd_io_scheduler = none
	// turns that off there).
	NoWriteMerge bool
	// ObjectMapRepair opens for writing an image whose object map is
	// flagged invalid (otherwise refused), to check or rebuild the map
	// (CheckObjectMap, RebuildObjectMap); writes stay refused until the
	// map is rebuilt.
	ObjectMapRepair bool
	// SnapIDs, when set, supplies snapshot ids allocated ahead of use
	// (see SnapIDReserve): snapshots then skip the monitor's commit.
	SnapIDs *SnapIDReserve
	// MergeBuffers, when set, lends the buffers that merged writes are
	// gathered in (see NoWriteMerge). A process that opens many images
	// passes them one pool, so that an image's burst of merged writes
	// reuses the buffers another's burst left, instead of every image
	// growing its own until the garbage collector takes them back. nil:
	// each image keeps its own pool.
	MergeBuffers BufferPool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// BufferPool lends byte buffers (OpenOptions.MergeBuffers). Get returns
// a buffer of length n, its contents unspecified; Put takes back a
// buffer Get returned, which its caller no longer uses. Both are called
// concurrently.
type BufferPool interface {
	Get(n int) *[]byte
	Put(b *[]byte)
}

// Image is an open RBD image. Its methods are safe for concurrent use;
// I/O to disjoint or overlapping ranges may run in parallel (overlapping
// writes land in an unspecified order, as with a disk).
type Image struct {
	name     string
	id       string
	meta     objects // the header's pool
	data     objects // the data pool (== meta without a data pool)
	readOnly bool
	snapID   uint64
	opts     OpenOptions
	log      *slog.Logger

	hdr   atomic.Pointer[header]
	stale atomic.Bool // a HEADER_UPDATE arrived: refresh before the next operation

	// ioGate is held shared by every write while it runs and
	// exclusively by operations that must see no write in flight
	// (releasing the exclusive lock, snapshot creation, resize).
	ioGate sync.RWMutex

	watchMu sync.Mutex
	watch   watchHandle

	lock   *exclusiveLock // nil without the feature or when read-only
	parent *Image         // clones: the parent at its snapshot
	// parentData, when set, supplies the parent's bytes instead of
	// parent (see SetParentData)
	parentData atomic.Pointer[ParentData]

	objLocks objectLocks
	merge    writeMerger

	// wa is the write-around cache: nil when off, and for read-only
	// images.
	wa *writeAround

	sizeMu   sync.Mutex
	sizeSubs map[int]func(int64)
	sizeNext int

	refreshMu sync.Mutex
	closed    atomic.Bool

	// qos is the throttles of the image's QoS limits (nil: none);
	// qosMu serializes their reloads
	qos   atomic.Pointer[qosState]
	qosMu sync.Mutex
}

// Open opens image name in the pool of ioc.
func Open(ctx context.Context, ioc *rados.IOContext, name string, opts OpenOptions) (*Image, error) {
	o, err := adapt(ioc)
	if err != nil {
		return nil, err
	}
	return openImage(ctx, o, name, "", opts)
}

// OpenByID opens the image with the given id (its name is looked up in
// the directory).
func OpenByID(ctx context.Context, ioc *rados.IOContext, id string, opts OpenOptions) (*Image, error) {
	o, err := adapt(ioc)
	if err != nil {
		return nil, err
	}
	return openImage(ctx, o, "", id, opts)
}

func openImage(ctx context.Context, o objects, name, id string, opts OpenOptions) (*Image, error) {
	var err error
	if id == "" {
		if id, err = imageID(ctx, o, name); err != nil {
			return nil, err
		}
	} else if name == "" {
		name, _ = imageNameOf(ctx, o, id)
	}
	log := discardOr(opts.Logger)
	img := &Image{name: name, id: id, meta: o, data: o, opts: opts, snapID: noSnap,
		readOnly: opts.ReadOnly || opts.Snapshot != "",
		log:      log.With("image", name, "id", id)}
	img.merge.shared = opts.MergeBuffers
	if !img.readOnly {
		img.wa = newWriteAround(opts.WriteAround)
	}
	h, err := loadHeader(ctx, o, id, img.readOnly)
	if err != nil {
		return nil, err
	}
	if err := h.checkFeatures(name, img.readOnly); err != nil {
		return nil, err
	}
	if opts.Snapshot != "" {
		s, ok := h.snapByName(opts.Snapshot)
		if !ok {
			return nil, fmt.Errorf("%w: snapshot %s@%s", ErrNotFound, name, opts.Snapshot)
		}
		img.snapID = s.ID
	}
	if !img.readOnly && !opts.ObjectMapRepair && h.features&FeatureObjectMap != 0 && h.flags&FlagObjectMapInvalid != 0 {
		return nil, fmt.Errorf("rbd: image %q: object map is flagged invalid; rebuild it with `rbd object-map rebuild` before writing", name)
	}
	img.hdr.Store(h)
	if h.dataPool >= 0 && h.dataPool != o.poolID() {
		if img.data, err = o.pool(ctx, h.dataPool, o.namespace()); err != nil {
			return nil, fmt.Errorf("rbd: image %q: data pool %d: %w", name, h.dataPool, err)
		}
	}
	if err := img.openParent(ctx); err != nil {
		return nil, err
	}
	if !img.readOnly && h.features&FeatureExclusiveLock != 0 {
		// Before the watch starts: its notifications read img.lock.
		img.lock = newExclusiveLock(img)
	}
	if err := img.loadQoS(ctx); err != nil {
		img.log.Warn("reading the image's qos options", "image", img.name, "err", err)
	}
	if img.snapID == noSnap {
		if err := img.startWatch(ctx); err != nil {
			img.closeParent(ctx)
			return nil, err
		}
	}
	if img.lock != nil {
		if opts.AcquireLock || opts.LockPolicy == LockRefuse {
			if err := img.lock.acquire(ctx); err != nil {
				_ = img.Close()
				return nil, err
			}
		}
	}
	return img, nil
}

// Close releases the exclusive lock (if held), removes the header watch
// and closes the parent. The image is unusable afterwards. It gives the
// cluster a minute to answer; CloseContext takes a context instead.
func (img *Image) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return img.CloseContext(ctx)
}

// CloseContext is Close with a context bounding the cluster round trips.
func (img *Image) CloseContext(ctx context.Context) error {
	if img.closed.Swap(true) {
		return nil
	}
	var errs []error
	if err := img.wa.flush(ctx); err != nil {
		errs = append(errs, err)
	}
	img.wa.close()
	if img.lock != nil {
		if err := img.lock.shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	img.watchMu.Lock()
	w := img.watch
	img.watch = nil
	img.watchMu.Unlock()
	if w != nil {
		if err := w.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("rbd: unwatching header: %w", err))
		}
	}
	img.closeParent(ctx)
	return errors.Join(errs...)
}

func (img *Image) closeParent(ctx context.Context) {
	if img.parent != nil {
		_ = img.parent.CloseContext(ctx)
		img.parent = nil
	}
}

// Name returns the image's name; ID its id.
func (img *Image) Name() string { return img.name }

// ID returns the image id.
func (img *Image) ID() string { return img.id }

// header returns the current header, refreshing it first when a
// notification said it changed.
func (img *Image) header(ctx context.Context) (*header, error) {
	if img.closed.Load() {
		return nil, ErrClosed
	}
	if img.stale.Load() {
		if err := img.refresh(ctx); err != nil {
			return nil, err
		}
	}
	return img.hdr.Load(), nil
}

// refresh re-reads the header.
func (img *Image) refresh(ctx context.Context) error {
	img.refreshMu.Lock()
	defer img.refreshMu.Unlock()
	img.stale.Store(false)
	h, err := loadHeader(ctx, img.meta, img.id, img.readOnly)
	if err != nil {
		img.stale.Store(true)
		return err
	}
	old := img.hdr.Load()
	if old != nil && h.features != old.features && !img.readOnly {
		if err := h.checkFeatures(img.name, false); err != nil {
			return err
		}
	}
	img.hdr.Store(h)
	if old != nil && img.sizeOf(old) != img.sizeOf(h) {
		img.sizeChanged(int64(img.sizeOf(h)))
	}
	if err := img.loadQoS(ctx); err != nil {
		img.log.Warn("reading the image's qos options", "image", img.name, "err", err)
	}
	return nil
}

// NotifySize calls fn with the new size whenever the image size changes,
// by Resize or by another client (seen through its header notification).
// fn is called from any goroutine and must not block; cancel stops the
// notifications.
func (img *Image) NotifySize(fn func(size int64)) (cancel func()) {
	img.sizeMu.Lock()
	defer img.sizeMu.Unlock()
	if img.sizeSubs == nil {
		img.sizeSubs = map[int]func(int64){}
	}
	id := img.sizeNext
	img.sizeNext++
	img.sizeSubs[id] = fn
	return func() {
		img.sizeMu.Lock()
		delete(img.sizeSubs, id)
		img.sizeMu.Unlock()
	}
}

func (img *Image) hasSizeSubscribers() bool {
	img.sizeMu.Lock()
	defer img.sizeMu.Unlock()
	return len(img.sizeSubs) > 0
}

func (img *Image) sizeChanged(size int64) {
	img.sizeMu.Lock()
	fns := make([]func(int64), 0, len(img.sizeSubs))
	for _, fn := range img.sizeSubs {
		fns = append(fns, fn)
	}
	img.sizeMu.Unlock()
	for _, fn := range fns {
		fn(size)
	}
}

// Refresh re-reads the image's metadata from the cluster.
func (img *Image) Refresh(ctx context.Context) error { return img.refresh(ctx) }

// Size returns the image size in bytes (at the open snapshot).
func (img *Image) Size() int64 { return int64(img.sizeOf(img.hdr.Load())) }

// sizeOf is the size of the open view (head or snapshot) in h.
func (img *Image) sizeOf(h *header) uint64 {
	if img.snapID != noSnap {
		if s, ok := h.snapByID(img.snapID); ok {
			return s.Size
		}
	}
	return h.size
}

// ReadOnly reports whether the image was opened read-only (or at a
// snapshot).
func (img *Image) ReadOnly() bool { return img.readOnly }

// Info describes an image as `rbd info` does.
type Info struct {
	Name            string
	ID              string
	Size            int64
	Order           uint8
	ObjectSize      uint64
	NumObjects      uint64
	BlockNamePrefix string
	Features        Feature
	OpFeatures      uint64
	Flags           uint64
	StripeUnit      uint64
	StripeCount     uint64
	DataPoolID      int64     // -1 without a data pool
	CreateTimestamp time.Time // zero when unknown
	Snapshots       []SnapInfo
	Parent          *ParentSpec
	ParentOverlap   int64
}

// Stat returns the image's metadata (re-reading the header).
func (img *Image) Stat(ctx context.Context) (Info, error) {
	if err := img.refresh(ctx); err != nil {
		return Info{}, err
	}
	h := img.hdr.Load()
	return infoOf(img.name, img.id, h, img.sizeOf(h)), nil
}

func infoOf(name, id string, h *header, size uint64) Info {
	info := Info{
		Name: name, ID: id, Size: int64(size), Order: h.order, ObjectSize: 1 << h.order,
		NumObjects: h.layout.NumObjects(size), BlockNamePrefix: h.prefix,
		Features: h.features, OpFeatures: h.opFeatures, Flags: h.flags,
		StripeUnit: h.layout.StripeUnit, StripeCount: h.layout.StripeCount,
		DataPoolID: h.dataPool, Snapshots: snapInfos(h.snaps), Parent: h.parent, ParentOverlap: int64(h.overlap),
	}
	if !h.created.IsZero() {
		info.CreateTimestamp = h.created.Time()
	}
	return info
}
