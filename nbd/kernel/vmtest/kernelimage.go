package vmtest

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// xenNotePVHEntry is XEN_ELFNOTE_PHYS32_ENTRY: an ELF kernel with it boots
// in qemu straight through the PVH entry point.
const xenNotePVHEntry = 18

// elfKernel decompresses the ELF kernel inside a bzImage into dir, so
// that qemu can boot it through PVH and the guest skips decompressing
// itself: under software emulation that saves several seconds per boot.
// It needs the xz program (Debian's kernels are XZ-compressed); without
// it, or for an image it cannot unpack, it returns "" and the caller
// boots the bzImage as it is.
func elfKernel(ctx context.Context, bzImage, dir string) (string, error) {
	xz, err := exec.LookPath("xz")
	if err != nil {
		return "", nil
	}
	img, err := os.ReadFile(bzImage)
	if err != nil {
		return "", err
	}
	off := bytes.Index(img, []byte("\xfd7zXZ\x00"))
	if off < 0 {
		return "", nil
	}
	out := filepath.Join(dir, "vmlinux")
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, xz, "-dc", "--single-stream")
	cmd.Stdin = bytes.NewReader(img[off:])
	cmd.Stdout = f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return "", fmt.Errorf("unpack %s: %v: %s", bzImage, err, stderr.String())
	}
	ok, err := hasPVHNote(out)
	if err != nil || !ok {
		os.Remove(out)
		return "", err
	}
	return out, nil
}

// hasPVHNote reports whether an ELF kernel carries the Xen PVH entry note.
func hasPVHNote(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, nil // not an ELF: not usable
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return false, err
		}
		for len(b) >= 12 {
			nameSz := int(binary.LittleEndian.Uint32(b))
			descSz := int(binary.LittleEndian.Uint32(b[4:]))
			typ := binary.LittleEndian.Uint32(b[8:])
			name := (nameSz + 3) &^ 3
			desc := (descSz + 3) &^ 3
			if nameSz < 0 || descSz < 0 || 12+name+desc > len(b) {
				break
			}
			if typ == xenNotePVHEntry && bytes.HasPrefix(b[12:12+nameSz], []byte("Xen")) {
				return true, nil
			}
			b = b[12+name+desc:]
		}
	}
	return false, nil
}
