package rbd

import "golang.org/x/sys/unix"

// adviseHugePages asks the kernel to back b with transparent huge pages
// (MADV_HUGEPAGE), which it does where THP is "always" or "madvise". It
// is advice only: when it fails (THP compiled out, say) nothing changes.
func adviseHugePages(b []byte) {
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
}
