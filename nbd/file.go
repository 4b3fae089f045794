package nbd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/purerbd/purerbd/internal/bufpool"
)

// File is a Backend over a regular file or a block device: pread/pwrite
// for data, fdatasync for flush, fallocate (punch hole, zero range) for
// trim and write zeroes, SEEK_DATA/SEEK_HOLE for block status. Every
// connection shares one descriptor and the kernel's page cache, so it is
// coherent across connections.
type File struct {
	f        *os.File
	readOnly bool
	regular  bool

	mu     sync.RWMutex // guards size
	size   int64
	notify sizeWatchers
}

// OpenFile opens path (a regular file or a block device) as a backend.
// Its size is the file's size.
func OpenFile(path string, readOnly bool) (*File, error) {
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("nbd: open file backend: %w", err)
	}
	b, err := NewFile(f, readOnly)
	if err != nil {
		f.Close()
		return nil, err
	}
	return b, nil
}

// NewFile makes a backend of an open file, which it then owns (Close
// closes it).
func NewFile(f *os.File, readOnly bool) (*File, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("nbd: file backend %s: %w", f.Name(), err)
	}
	b := &File{f: f, readOnly: readOnly, regular: fi.Mode().IsRegular(), size: fi.Size()}
	if !b.regular {
		// A block device reports its size through seeking to its end.
		end, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, fmt.Errorf("nbd: file backend %s: size: %w", f.Name(), err)
		}
		b.size = end
	}
	return b, nil
}

// Close closes the file.
func (b *File) Close() error { return b.f.Close() }

// Size returns the size of the export.
func (b *File) Size() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.size
}

// ReadOnly reports whether the file was opened read-only.
func (b *File) ReadOnly() bool { return b.readOnly }

// ReadAt reads with pread.
func (b *File) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return b.f.ReadAt(p, off)
}

// WriteAt writes with pwrite.
func (b *File) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	if b.readOnly {
		return 0, ErrPerm
	}
	return b.f.WriteAt(p, off)
}

// Flush makes completed writes durable (fdatasync).
func (b *File) Flush(context.Context) error {
	if err := dataSync(b.f); err != nil {
		return fmt.Errorf("nbd: flush %s: %w", b.f.Name(), err)
	}
	return nil
}

// Trim punches a hole; where the file system cannot, it does nothing (a
// trim is only a hint).
func (b *File) Trim(_ context.Context, off, length int64) error {
	if b.readOnly {
		return ErrPerm
	}
	err := punchHole(b.f, off, length)
	if err != nil && !errors.Is(err, errNoFallocate) {
		return fmt.Errorf("nbd: trim %s: %w", b.f.Name(), err)
	}
	return nil
}

// Zero punches a hole (unless ZeroNoHole), else zeroes the range in place
// with fallocate, else writes zeroes. With ZeroFast it refuses what would
// need writing.
func (b *File) Zero(ctx context.Context, off, length int64, flags ZeroFlags) error {
	if b.readOnly {
		return ErrPerm
	}
	if flags&ZeroNoHole == 0 {
		err := punchHole(b.f, off, length)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errNoFallocate) {
			return fmt.Errorf("nbd: zero %s: %w", b.f.Name(), err)
		}
	}
	err := zeroRange(b.f, off, length)
	if err == nil {
		return nil
	}
	if !errors.Is(err, errNoFallocate) {
		return fmt.Errorf("nbd: zero %s: %w", b.f.Name(), err)
	}
	if flags&ZeroFast != 0 {
		return ErrFastZeroUnsupported
	}
	var pool bufpool.Pool
	return writeZeroBuffers(ctx, b, &pool, off, length)
}

// BlockStatus reports holes (SEEK_HOLE) as zero holes and data
// (SEEK_DATA) as data; block devices and file systems without that
// support report everything as data.
func (b *File) BlockStatus(_ context.Context, off, length int64) ([]Extent, error) {
	end := min(off+length, b.Size())
	if !b.regular || off >= end {
		return []Extent{{Length: max(end-off, 1)}}, nil
	}
	var out []Extent
	for pos := off; pos < end && len(out) < 1024; {
		data, err := seekData(b.f, pos)
		switch {
		case errors.Is(err, errNoSeekData):
			return append(out, Extent{Length: end - pos}), nil
		case errors.Is(err, syscall.ENXIO): // only a hole up to the end
			data = end
		case err != nil:
			return nil, fmt.Errorf("nbd: block status %s: %w", b.f.Name(), err)
		}
		if data > pos {
			n := min(data, end) - pos
			out = append(out, Extent{Length: n, Flags: ExtentHole | ExtentZero})
			pos += n
			continue
		}
		hole, err := seekHole(b.f, pos)
		if err != nil {
			return nil, fmt.Errorf("nbd: block status %s: %w", b.f.Name(), err)
		}
		n := min(max(hole, pos+1), end) - pos
		out = append(out, Extent{Length: n})
		pos += n
	}
	return out, nil
}

// MultiConnCoherent is true: one descriptor, one page cache.
func (b *File) MultiConnCoherent() bool { return true }

// Resize truncates or extends a regular file.
func (b *File) Resize(_ context.Context, size int64) error {
	if b.readOnly {
		return ErrPerm
	}
	if !b.regular {
		return fmt.Errorf("nbd: resize %s: not a regular file: %w", b.f.Name(), ErrNotSup)
	}
	b.mu.Lock()
	old := b.size
	err := b.f.Truncate(size)
	if err == nil {
		b.size = size
	}
	b.mu.Unlock()
	if err != nil {
		return fmt.Errorf("nbd: resize %s: %w", b.f.Name(), err)
	}
	if size != old {
		b.notify.changed(size)
	}
	return nil
}

// NotifySize calls fn after every Resize that changed the size.
func (b *File) NotifySize(fn func(size int64)) (cancel func()) {
	return b.notify.add(fn)
}

// Errors of the platform hooks saying a facility is missing.
var (
	errNoFallocate = errors.New("fallocate mode not supported")
	errNoSeekData  = errors.New("SEEK_DATA not supported")
)
