//go:build !linux

package nbd

// mapSegment allocates n zeroed bytes on the heap.
func mapSegment(n int) ([]byte, error) { return make([]byte, n), nil }

// unmapSegment leaves the memory to the garbage collector.
func unmapSegment([]byte) {}

// populatePages does nothing: heap memory is backed already.
func populatePages([]byte) {}

// dropPages zeroes b.
func dropPages(b []byte) { clear(b) }
