package nbd

import "context"

// Backend holds the bytes of one export. Its methods are called from many
// goroutines at once; requests that overlap in flight have no defined order
// (the client must not issue them), but must not corrupt the backend.
//
// ReadAt and WriteAt follow io.ReaderAt and io.WriterAt, plus a context:
// they transfer all of p or return an error. A ReadAt that returns fewer
// bytes with io.EOF (a backing store shorter than Size) is completed with
// zeroes. The server checks every request against Size before calling, so
// a backend never sees a range outside [0, Size()).
//
// More abilities are found by type assertion on the value: Flusher,
// Trimmer, Zeroer, BlockStatuser (and SparseReader), Cacher,
// MultiConnCoherent, Resizer, SizeNotifier and ReadOnlyBackend. Package
// nbd/rbdnbd makes a Backend with all that apply of an RBD image.
type Backend interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	WriteAt(ctx context.Context, p []byte, off int64) (int, error)
	// Size is the current size of the export in bytes.
	Size() int64
}

// Flusher makes every write that completed before the call durable.
// A backend with Flusher gets NBD_CMD_FLUSH and FUA (a FUA write is a
// write followed by Flush).
type Flusher interface {
	Flush(ctx context.Context) error
}

// Trimmer discards a range (NBD_CMD_TRIM). Afterwards the range may read
// as anything until written again; a backend may ignore the request.
type Trimmer interface {
	Trim(ctx context.Context, off, length int64) error
}

// ZeroFlags modify a Zeroer call.
type ZeroFlags uint8

const (
	// ZeroNoHole asks that the range stay allocated (NBD_CMD_FLAG_NO_HOLE):
	// the backend must not punch a hole to make it read as zero.
	ZeroNoHole ZeroFlags = 1 << iota
	// ZeroFast asks for the operation only if it is faster than writing
	// zeroes (NBD_CMD_FLAG_FAST_ZERO). A backend that cannot do that must
	// return ErrFastZeroUnsupported at once and change nothing.
	ZeroFast
)

// Zeroer makes a range read as zeroes (NBD_CMD_WRITE_ZEROES). Without it
// the server writes zero buffers through WriteAt and refuses fast zeroes.
type Zeroer interface {
	Zero(ctx context.Context, off, length int64, flags ZeroFlags) error
}

// ExtentFlags describe one extent in the base:allocation context.
type ExtentFlags uint32

const (
	// ExtentHole marks a range not allocated in the backing store.
	ExtentHole ExtentFlags = stateHole
	// ExtentZero marks a range known to read as zeroes.
	ExtentZero ExtentFlags = stateZero
)

// Extent is a run of bytes with the same allocation status.
type Extent struct {
	Length int64
	Flags  ExtentFlags
}

// BlockStatuser reports allocation (NBD_CMD_BLOCK_STATUS with
// base:allocation, and holes in structured reads unless SparseReader
// declines). BlockStatus returns consecutive extents starting at off;
// they must cover at least one byte and may stop before off+length or run
// past it. Without BlockStatuser the whole export is reported as
// allocated data.
type BlockStatuser interface {
	BlockStatus(ctx context.Context, off, length int64) ([]Extent, error)
}

// DirtyBitmapper offers dirty bitmaps as qemu:dirty-bitmap:NAME metadata
// contexts, as qemu-nbd exports a qcow2 image's bitmaps: for each name,
// the ranges that changed since the point in time the name stands for
// (an RBD export: each earlier snapshot). Backup tools read them with
// NBD_CMD_BLOCK_STATUS (qemu-img map's x-dirty-bitmap, nbdinfo --map).
type DirtyBitmapper interface {
	// DirtyBitmaps names the bitmaps the export offers now.
	DirtyBitmaps(ctx context.Context) ([]string, error)
	// DirtyStatus returns consecutive extents of bitmap starting at off,
	// as BlockStatus does: at least one byte, and they may stop before
	// off+length or run past it.
	DirtyStatus(ctx context.Context, bitmap string, off, length int64) ([]DirtyExtent, error)
}

// DirtyExtent is a range of a dirty bitmap: changed or not.
type DirtyExtent struct {
	Length int64
	Dirty  bool
}

// SparseReader is implemented by a BlockStatuser to say whether the
// server may call BlockStatus before a structured read, to send the holes
// in it as hole chunks instead of zero bytes; without it, it may. A
// backend whose block status costs a round trip (an RBD image) returns
// false, so that a read does not pay for two.
type SparseReader interface {
	SparseReads() bool
}

// Cacher prefetches a range (NBD_CMD_CACHE). Without it the command
// succeeds doing nothing.
type Cacher interface {
	Cache(ctx context.Context, off, length int64) error
}

// MultiConnCoherent is implemented by backends whose flushes are seen by
// every connection (no per-connection cache). When it returns true the
// server advertises NBD_FLAG_CAN_MULTI_CONN.
type MultiConnCoherent interface {
	MultiConnCoherent() bool
}

// ReadOnlyBackend is implemented by backends that refuse writes; when it
// returns true the export is served read-only.
type ReadOnlyBackend interface {
	ReadOnly() bool
}

// Resizer changes the size of a backend. The server itself never resizes;
// the owner of the backend does (for example on a CSI volume expansion).
type Resizer interface {
	Resize(ctx context.Context, size int64) error
}

// SizeNotifier tells its subscribers when the size changed, by Resize or
// by someone else (an RBD image resized by another client). fn is called
// with the new size, from any goroutine, and must not block; cancel stops
// the notifications. The server checks requests against Size() each time,
// so it needs no notification itself; the kernel attach uses it to tell
// the kernel about the new size.
type SizeNotifier interface {
	NotifySize(fn func(size int64)) (cancel func())
}
