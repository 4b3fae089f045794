package nbd

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// mapSegment reserves n bytes of anonymous memory outside the Go heap;
// pages are backed only once written. Huge pages are declined, so that a
// 4 KiB write costs 4 KiB and a trimmed chunk is given back whole.
func mapSegment(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	_ = unix.Madvise(b, unix.MADV_NOHUGEPAGE) // a hint; the data is right either way
	return b, nil
}

// unmapSegment releases what mapSegment returned.
func unmapSegment(b []byte) { _ = unix.Munmap(b) }

// populatePages backs the pages of b with memory in one call, instead of
// one page fault per page on the first write. Kernels before 5.14 refuse;
// the faults then do the same work.
func populatePages(b []byte) { _ = unix.Madvise(b, unix.MADV_POPULATE_WRITE) }

// dropPages gives the pages of b back to the kernel; they read as zeroes
// afterwards. b is page aligned.
func dropPages(b []byte) {
	if unix.Madvise(b, unix.MADV_DONTNEED) != nil {
		clear(b)
	}
}
