package main

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"
)

// directAlign is the alignment O_DIRECT I/O gets here: offsets, lengths
// and buffer addresses are multiples of it, which covers every logical
// block size up to a page.
const directAlign = 4096

// defaultFileSlots is how many record slots stream uses on a regular
// file when --slots is not given (a block device's slots fill it).
const defaultFileSlots = 4096

// openTarget opens the file or block device records go to or come from.
// A regular file is created when writing. direct bypasses the page cache
// (O_DIRECT) so that every read and write reaches the device.
func openTarget(path string, write, direct bool) (*os.File, error) {
	flags := os.O_RDONLY
	if write {
		flags = os.O_RDWR | os.O_CREATE
	}
	if direct {
		flags |= syscall.O_DIRECT
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}

// checkDirect reports whether size suits O_DIRECT I/O.
func checkDirect(size int, direct bool) error {
	if direct && size%directAlign != 0 {
		return fmt.Errorf("record size %d: --direct needs a multiple of %d", size, directAlign)
	}
	return nil
}

// capacity returns how many bytes a block device holds, or -1 for a
// regular file, which grows as records are written (or a character
// device, which has no size).
func capacity(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		return -1, nil
	}
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", f.Name(), err)
	}
	return n, nil
}

// alignedBuf returns a buffer of n bytes whose address is aligned for
// O_DIRECT.
func alignedBuf(n int) []byte {
	raw := make([]byte, n+directAlign)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&raw[0])) % directAlign); r != 0 {
		off = directAlign - r
	}
	return raw[off : off+n : off+n]
}

// datasync makes what was written to f durable (fdatasync(2)).
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
		return nil
	}
}
