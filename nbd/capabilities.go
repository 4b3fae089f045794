package nbd

import "context"

// capabilities are the optional abilities of a backend, found once.
type capabilities struct {
	flush  func(ctx context.Context) error
	trim   func(ctx context.Context, off, length int64) error
	zero   Zeroer
	status BlockStatuser
	dirty  DirtyBitmapper
	// sparseReads: status is cheap enough to cut holes out of structured
	// reads (a BlockStatuser that does not decline through SparseReader).
	sparseReads bool
	cache       Cacher
	multiConn   bool
	readOnly    bool
}

func discover(b Backend) capabilities {
	var c capabilities
	if f, ok := b.(Flusher); ok {
		c.flush = f.Flush
	}
	if t, ok := b.(Trimmer); ok {
		c.trim = t.Trim
	}
	if z, ok := b.(Zeroer); ok {
		c.zero = z
	}
	if s, ok := b.(BlockStatuser); ok {
		c.status = s
		c.sparseReads = true
		if r, ok := b.(SparseReader); ok && !r.SparseReads() {
			c.sparseReads = false
		}
	}
	if d, ok := b.(DirtyBitmapper); ok {
		c.dirty = d
	}
	if k, ok := b.(Cacher); ok {
		c.cache = k
	}
	if m, ok := b.(MultiConnCoherent); ok && m.MultiConnCoherent() {
		c.multiConn = true
	}
	if ro, ok := b.(ReadOnlyBackend); ok && ro.ReadOnly() {
		c.readOnly = true
	}
	return c
}
