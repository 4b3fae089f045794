package hugebuf

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// mapHuge maps n bytes of anonymous memory and asks for huge pages. A
// refused madvise (THP compiled out or set to never) keeps the mapping:
// it is still a buffer.
func mapHuge(n int) ([]byte, bool) {
	p, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, false
	}
	_ = unix.Madvise(p, unix.MADV_HUGEPAGE)
	return p, true
}

func unmap(p []byte) error {
	if err := unix.Munmap(p); err != nil {
		return fmt.Errorf("hugebuf: unmap %d bytes: %w", len(p), err)
	}
	return nil
}
