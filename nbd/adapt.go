package nbd

import (
	"context"
	"fmt"
	"io"
)

// ContextReaderAt is the context-taking read method name a type can offer
// next to io.ReaderAt (Go cannot have two ReadAt methods on one type).
type ContextReaderAt interface {
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
}

// ContextWriterAt is the write counterpart of ContextReaderAt.
type ContextWriterAt interface {
	WriteAtContext(ctx context.Context, p []byte, off int64) (int, error)
}

// sizer is what Adapt needs besides the data methods.
type sizer interface {
	Size() int64
}

// Discarder is accepted in place of Trimmer (the name librbd and the block
// layer use for the same thing).
type Discarder interface {
	Discard(ctx context.Context, off, length int64) error
}

// Adapt turns v into a Backend. v must have Size() int64 and a way to read:
// a Backend is returned as is; otherwise ReadAtContext (ContextReaderAt) is
// preferred over io.ReaderAt, and WriteAtContext over io.WriterAt. A value
// with no write method is served read-only. The optional interfaces
// (Flusher, Trimmer or Discarder, Zeroer or HoleZeroer, BlockStatuser or
// AllocationReporter, ...) are looked up on v itself; when v is a Resizer
// or SizeNotifier, so is the Backend returned.
func Adapt(v any) (Backend, error) {
	if b, ok := v.(Backend); ok {
		return b, nil
	}
	s, ok := v.(sizer)
	if !ok {
		return nil, fmt.Errorf("nbd: adapt %T: no Size() int64 method", v)
	}
	a := &adapted{inner: v, size: s}
	switch r := v.(type) {
	case ContextReaderAt:
		a.read = r.ReadAtContext
	case io.ReaderAt:
		a.read = func(_ context.Context, p []byte, off int64) (int, error) { return r.ReadAt(p, off) }
	default:
		return nil, fmt.Errorf("nbd: adapt %T: neither ReadAtContext nor io.ReaderAt", v)
	}
	switch w := v.(type) {
	case ContextWriterAt:
		a.write = w.WriteAtContext
	case io.WriterAt:
		a.write = func(_ context.Context, p []byte, off int64) (int, error) { return w.WriteAt(p, off) }
	}
	return withSizeAbilities(a), nil
}

// adapted is the Backend made by Adapt.
type adapted struct {
	inner any
	size  sizer
	read  func(ctx context.Context, p []byte, off int64) (int, error)
	write func(ctx context.Context, p []byte, off int64) (int, error)
}

func (a *adapted) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return a.read(ctx, p, off)
}

func (a *adapted) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if a.write == nil {
		return 0, ErrPerm
	}
	return a.write(ctx, p, off)
}

func (a *adapted) Size() int64 { return a.size.Size() }

func (a *adapted) ReadOnly() bool {
	if a.write == nil {
		return true
	}
	if ro, ok := a.inner.(ReadOnlyBackend); ok {
		return ro.ReadOnly()
	}
	return false
}

// capabilities are the optional abilities of a backend, found once.
type capabilities struct {
	flush    func(ctx context.Context) error
	trim     func(ctx context.Context, off, length int64) error
	zero     Zeroer
	zeroHole func(ctx context.Context, off, length int64) error // HoleZeroer
	status   BlockStatuser
	// sparseReads: status is cheap enough to cut holes out of structured
	// reads (a BlockStatuser; not an AllocationReporter).
	sparseReads bool
	cache       Cacher
	multiConn   bool
	readOnly    bool
}

func discover(b Backend) capabilities {
	var c capabilities
	// Look on the backend first, then on what Adapt wrapped.
	candidates := []any{b}
	if a, ok := b.(adaptedValue); ok {
		candidates = append(candidates, a.adaptedBase().inner)
	}
	for _, v := range candidates {
		if f, ok := v.(Flusher); ok && c.flush == nil {
			c.flush = f.Flush
		}
		if t, ok := v.(Trimmer); ok && c.trim == nil {
			c.trim = t.Trim
		}
		if d, ok := v.(Discarder); ok && c.trim == nil {
			c.trim = d.Discard
		}
		if z, ok := v.(Zeroer); ok && c.zero == nil {
			c.zero = z
		}
		if s, ok := v.(BlockStatuser); ok && c.status == nil {
			c.status = s
			c.sparseReads = true
		}
		if k, ok := v.(Cacher); ok && c.cache == nil {
			c.cache = k
		}
		if m, ok := v.(MultiConnCoherent); ok && m.MultiConnCoherent() {
			c.multiConn = true
		}
	}
	// The plain-typed variants (plain.go), where no typed one was found.
	for _, v := range candidates {
		if z, ok := v.(HoleZeroer); ok && c.zero == nil && c.zeroHole == nil {
			c.zeroHole = z.WriteZeroes
		}
		if r, ok := v.(AllocationReporter); ok && c.status == nil {
			c.status = reportedStatus{r}
		}
	}
	if ro, ok := b.(ReadOnlyBackend); ok && ro.ReadOnly() {
		c.readOnly = true
	}
	return c
}
