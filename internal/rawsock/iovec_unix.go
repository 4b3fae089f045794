//go:build unix

package rawsock

import (
	"syscall"
	"unsafe"
)

type iovec = syscall.Iovec

func newIovec(b []byte) iovec {
	v := iovec{Base: unsafe.SliceData(b)}
	v.SetLen(len(b))
	return v
}
