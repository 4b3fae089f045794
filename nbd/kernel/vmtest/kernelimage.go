package vmtest

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
)

// xenNotePVHEntry is XEN_ELFNOTE_PHYS32_ENTRY: an ELF kernel with it boots
// in qemu straight through the PVH entry point.
const xenNotePVHEntry = 18

// elfKernel decompresses the ELF kernel inside a bzImage into dir, so
// that qemu can boot it through PVH and the guest skips decompressing
// itself: under software emulation that saves several seconds per boot.
// Debian's kernels are XZ-compressed up to 6.1 (with the x86 BCJ filter,
// which github.com/ulikunitz/xz lacks: the xz program unpacks them) and
// zstd-compressed since (6.12, 7.2: decoded here). Without the xz
// program, or for an image it cannot unpack, it returns "" and the
// caller boots the bzImage as it is.
func elfKernel(ctx context.Context, bzImage, dir string) (string, error) {
	img, err := os.ReadFile(bzImage)
	if err != nil {
		return "", err
	}
	payload := bzPayload(img)
	out := filepath.Join(dir, "vmlinux")
	switch {
	case bytes.HasPrefix(payload, []byte("\xfd7zXZ\x00")):
		err = unxz(ctx, payload, out)
	case bytes.HasPrefix(payload, []byte{0x28, 0xb5, 0x2f, 0xfd}) && len(payload) > 4:
		// the build appends the uncompressed size (4 bytes) to the frame
		err = unzstd(ctx, payload[:len(payload)-4], out)
	default:
		return "", nil
	}
	if err != nil {
		os.Remove(out)
		if errors.Is(err, exec.ErrNotFound) {
			return "", nil
		}
		return "", fmt.Errorf("unpack %s: %w", bzImage, err)
	}
	ok, err := hasPVHNote(out)
	if err != nil || !ok {
		os.Remove(out)
		return "", err
	}
	return out, nil
}

// bzPayload returns the compressed kernel of a bzImage, as its setup
// header locates it (boot protocol 2.08+), or where an XZ stream starts
// for an image without those fields.
func bzPayload(img []byte) []byte {
	if len(img) >= 0x250 && string(img[0x202:0x206]) == "HdrS" && binary.LittleEndian.Uint16(img[0x206:]) >= 0x208 {
		setupSects := int(img[0x1f1])
		if setupSects == 0 {
			setupSects = 4
		}
		start := (setupSects+1)*512 + int(binary.LittleEndian.Uint32(img[0x248:]))
		n := int(binary.LittleEndian.Uint32(img[0x24c:]))
		if start >= 0 && n > 0 && start+n <= len(img) {
			return img[start : start+n]
		}
	}
	if off := bytes.Index(img, []byte("\xfd7zXZ\x00")); off >= 0 {
		return img[off:]
	}
	return nil
}

// unxz runs the xz program on an XZ payload.
func unxz(ctx context.Context, payload []byte, out string) error {
	xzBin, err := exec.LookPath("xz")
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, xzBin, "-dc", "--single-stream")
	cmd.Stdin = bytes.NewReader(payload)
	cmd.Stdout = f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %s", err, stderr.String())
	}
	return nil
}

// unzstd decodes a zstd payload.
func unzstd(ctx context.Context, payload []byte, out string) error {
	zr, err := zstd.NewReader(bytes.NewReader(payload), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<30))
	if err != nil {
		return err
	}
	defer zr.Close()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, ctxReader{ctx, zr})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ctxReader ends a copy when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
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
