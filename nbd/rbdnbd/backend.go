// Package rbdnbd serves an RBD image over NBD: New turns an *rbd.Image
// into an nbd.Backend with every ability the image has, so that an image
// exported by the CLI (purerbd nbd serve and map), the CSI node, the
// chaos test and the bench is offered the same way: reads and writes,
// flush and FUA, trim, write zeroes (fast ones included), block status and
// multi-connection, read-only when the image is, and size changes made
// elsewhere reported to the kernel.
//
// Packages rbd and nbd do not import each other; this package alone knows
// both. It lives under nbd because it is one more way to make an NBD
// backend, and the NBD layer sits above RBD.
package rbdnbd

import (
	"context"
	"fmt"
	"sync"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/rbd"
)

// Image is the method set of *rbd.Image that serving needs. New takes the
// interface, not the type, for callers that wrap an image (the CSI node's
// image also releases its node claim when closed) or stand a file in for
// one in tests; the methods keep the meaning package rbd gives them.
type Image interface {
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
	WriteAtContext(ctx context.Context, p []byte, off int64) (int, error)
	Size() int64
	ReadOnly() bool
	Flush(ctx context.Context) error
	// Discard deallocates a range, which then reads as zeroes.
	Discard(ctx context.Context, off, length int64) error
	// WriteZeroes makes a range read as zeroes, deallocating where it can.
	WriteZeroes(ctx context.Context, off, length int64) error
	// AllocatedExtents calls fn for consecutive extents from off, each
	// allocated or a hole that reads as zeroes; it may stop short.
	AllocatedExtents(ctx context.Context, off, length int64, fn func(off, length int64, allocated bool) error) error
	// NotifySize calls fn when the size changed, here or elsewhere.
	NotifySize(fn func(size int64)) (cancel func())
}

var _ Image = (*rbd.Image)(nil)

// Backend is an Image served over NBD. One Backend, like one Image, serves
// every connection of an export, so they are coherent.
type Backend struct {
	img Image
	// zeros holds zero-filled buffers for write zeroes that must stay
	// allocated; writes never change them (io.WriterAt's contract).
	zeros sync.Pool
}

var (
	_ nbd.Backend           = (*Backend)(nil)
	_ nbd.Flusher           = (*Backend)(nil)
	_ nbd.Trimmer           = (*Backend)(nil)
	_ nbd.Zeroer            = (*Backend)(nil)
	_ nbd.BlockStatuser     = (*Backend)(nil)
	_ nbd.SparseReader      = (*Backend)(nil)
	_ nbd.MultiConnCoherent = (*Backend)(nil)
	_ nbd.ReadOnlyBackend   = (*Backend)(nil)
	_ nbd.SizeNotifier      = (*Backend)(nil)
	_ nbd.DirtyBitmapper    = (*Backend)(nil)
)

// snapshotDiffer is what an Image needs for dirty bitmaps (*rbd.Image
// has it): the snapshots before the one it is open at, and what changed
// since one of them.
type snapshotDiffer interface {
	SnapshotsBefore(ctx context.Context) ([]rbd.SnapInfo, error)
	Diff(ctx context.Context, off, length int64, opts rbd.DiffOptions, fn func(off, length int64, exists bool) error) error
}

var _ snapshotDiffer = (*rbd.Image)(nil)

// zeroStep is the size of the writes that zero a range kept allocated.
const zeroStep = 1 << 20

// New returns the Backend serving img. Closing img is the caller's
// business, after the export stopped.
func New(img Image) *Backend {
	b := &Backend{img: img}
	b.zeros.New = func() any { return new([zeroStep]byte) }
	return b
}

func (b *Backend) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return b.img.ReadAtContext(ctx, p, off)
}

func (b *Backend) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	return b.img.WriteAtContext(ctx, p, off)
}

func (b *Backend) Size() int64 { return b.img.Size() }

// ReadOnly is the image's: a snapshot, or an image opened read-only.
func (b *Backend) ReadOnly() bool { return b.img.ReadOnly() }

func (b *Backend) Flush(ctx context.Context) error { return b.img.Flush(ctx) }

// Trim discards the range (whole objects removed, as librbd does).
func (b *Backend) Trim(ctx context.Context, off, length int64) error {
	return b.img.Discard(ctx, off, length)
}

// Zero deallocates the range through WriteZeroes, fast zeroes included
// (removing objects is taken to be faster than writing them). With
// NO_HOLE it writes zero buffers instead, and refuses a fast zero.
func (b *Backend) Zero(ctx context.Context, off, length int64, flags nbd.ZeroFlags) error {
	switch {
	case flags&nbd.ZeroNoHole == 0:
		return b.img.WriteZeroes(ctx, off, length)
	case flags&nbd.ZeroFast != 0:
		return nbd.ErrFastZeroUnsupported
	}
	buf := b.zeros.Get().(*[zeroStep]byte)
	defer b.zeros.Put(buf)
	return nbd.ZeroByWriting(ctx, b, buf[:], off, length)
}

// BlockStatus reports the image's allocation: a hole reads as zeroes
// (NBD_STATE_HOLE|NBD_STATE_ZERO), anything else as data.
func (b *Backend) BlockStatus(ctx context.Context, off, length int64) ([]nbd.Extent, error) {
	var out []nbd.Extent
	pos := off
	err := b.img.AllocatedExtents(ctx, off, length, func(o, n int64, allocated bool) error {
		if o != pos || n <= 0 {
			return fmt.Errorf("rbdnbd: allocation reported at %d+%d, expected an extent at %d", o, n, pos)
		}
		pos += n
		flags := nbd.ExtentFlags(0)
		if !allocated {
			flags = nbd.ExtentHole | nbd.ExtentZero
		}
		if k := len(out); k > 0 && out[k-1].Flags == flags {
			out[k-1].Length += n
		} else {
			out = append(out, nbd.Extent{Length: n, Flags: flags})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DirtyBitmaps names a qemu:dirty-bitmap: context for each snapshot taken
// before the one the image is open at (each snapshot, for the head):
// a backup tool reads what changed since its last backup's snapshot.
// An image that cannot diff offers none.
func (b *Backend) DirtyBitmaps(ctx context.Context) ([]string, error) {
	d, ok := b.img.(snapshotDiffer)
	if !ok {
		return nil, nil
	}
	snaps, err := d.SnapshotsBefore(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(snaps))
	for i, s := range snaps {
		names[i] = s.Name
	}
	return names, nil
}

// DirtyStatus reports what changed since snapshot bitmap (written or
// discarded) as dirty, the rest as clean: rbd diff --from-snap.
func (b *Backend) DirtyStatus(ctx context.Context, bitmap string, off, length int64) ([]nbd.DirtyExtent, error) {
	d, ok := b.img.(snapshotDiffer)
	if !ok {
		return nil, fmt.Errorf("rbdnbd: the image cannot tell what changed since %q", bitmap)
	}
	end := min(off+length, b.img.Size())
	var out []nbd.DirtyExtent
	add := func(n int64, dirty bool) {
		if k := len(out); k > 0 && out[k-1].Dirty == dirty {
			out[k-1].Length += n
		} else {
			out = append(out, nbd.DirtyExtent{Length: n, Dirty: dirty})
		}
	}
	pos := off
	err := d.Diff(ctx, off, end-off, rbd.DiffOptions{FromSnap: bitmap}, func(o, n int64, _ bool) error {
		if o < pos || n <= 0 {
			return fmt.Errorf("rbdnbd: change reported at %d+%d, before %d", o, n, pos)
		}
		if o > pos {
			add(o-pos, false)
		}
		add(n, true)
		pos = o + n
		return nil
	})
	if err != nil {
		return nil, err
	}
	if pos < end {
		add(end-pos, false)
	}
	return out, nil
}

// SparseReads is false: the allocation may cost a round trip to the
// cluster (object stats, or the object map while another client holds
// the lock), which a read should not pay on top of its own.
func (b *Backend) SparseReads() bool { return false }

// MultiConnCoherent is true: every connection goes through the one Image,
// whose flush covers all writes made through it.
func (b *Backend) MultiConnCoherent() bool { return true }

// NotifySize reports the image's size changes (a resize by this client or
// another), so that a kernel device follows them.
func (b *Backend) NotifySize(fn func(size int64)) (cancel func()) { return b.img.NotifySize(fn) }
