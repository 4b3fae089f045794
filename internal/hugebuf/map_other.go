//go:build !linux

package hugebuf

// mapHuge: no huge pages here; Alloc uses the Go heap.
func mapHuge(int) ([]byte, bool) { return nil, false }

func unmap([]byte) error { return nil }
