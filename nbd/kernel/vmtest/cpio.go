package vmtest

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// archive collects the files of an initramfs and writes them as an
// uncompressed cpio archive in the "newc" format, which the kernel unpacks
// into its root file system. Uncompressed, because inflating under
// software emulation costs more than reading the extra bytes.
type archive struct {
	entries map[string]entry
}

type entry struct {
	mode uint32 // file type and permission bits
	data []byte
}

const (
	modeDir  = 0o040000
	modeFile = 0o100000
)

func newArchive() *archive { return &archive{entries: make(map[string]entry)} }

// dir adds a directory and its parents.
func (a *archive) dir(p string) {
	p = clean(p)
	for p != "" && p != "." {
		if _, ok := a.entries[p]; ok {
			return
		}
		a.entries[p] = entry{mode: modeDir | 0o755}
		p = path.Dir(p)
	}
}

// file adds a regular file, and its directory.
func (a *archive) file(p string, perm uint32, data []byte) {
	p = clean(p)
	a.dir(path.Dir(p))
	a.entries[p] = entry{mode: modeFile | perm&0o7777, data: data}
}

func clean(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// writeTo writes the archive, parents before children.
func (a *archive) writeTo(w io.Writer) error {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	sort.Strings(names) // a parent sorts before what it holds
	for i, n := range names {
		e := a.entries[n]
		nlink := 1
		if e.mode&modeDir != 0 {
			nlink = 2
		}
		if err := writeHeader(w, uint32(i+1), e.mode, nlink, len(e.data), n); err != nil {
			return err
		}
		if _, err := w.Write(e.data); err != nil {
			return err
		}
		if err := pad(w, len(e.data)); err != nil {
			return err
		}
	}
	return writeHeader(w, 0, 0, 1, 0, "TRAILER!!!")
}

// writeHeader writes a newc header and the NUL-terminated name, padded
// to 4 bytes.
func writeHeader(w io.Writer, ino, mode uint32, nlink, size int, name string) error {
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize, check
	h := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	if _, err := io.WriteString(w, h+name+"\x00"); err != nil {
		return err
	}
	return pad(w, len(h)+len(name)+1)
}

func pad(w io.Writer, n int) error {
	if r := n % 4; r != 0 {
		_, err := w.Write(make([]byte, 4-r))
		return err
	}
	return nil
}
