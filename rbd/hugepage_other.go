//go:build !linux

package rbd

// adviseHugePages does nothing where madvise(MADV_HUGEPAGE) does not
// exist.
func adviseHugePages([]byte) {}
