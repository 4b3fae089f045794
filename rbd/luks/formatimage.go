package luks

import (
	"context"
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/rbd"
)

// FormatImage writes a new LUKS header with one keyslot for passphrase at
// the start of dev, as `rbd encryption format` does: the data offset is
// aligned to alignment (the image's object size), and the image must be
// larger than the data offset. The rest of the header area, up to the
// data offset, is wiped (discarded where dev can, as *rbd.Image can, or
// else written with zeroes), as cryptsetup wipes it: what the image held
// there before must not outlive the format.
func FormatImage(ctx context.Context, dev Device, passphrase []byte, o FormatOptions) (*Header, error) {
	h, key, err := formatImage(ctx, dev, passphrase, o, false)
	clear(key)
	return h, err
}

// FormatAndOpen is FormatImage followed by Open with the same
// passphrase, without deriving the volume key from the passphrase again
// (Format made it): one run of the keyslot's KDF instead of two. It
// writes a standalone header (the LUKS magic, the header area wiped)
// even on a clone: it is for an image whose parent holds no encryption
// and no data (a CSI volume restored from a volume never formatted),
// which Open then opens alone. A clone of an encrypted parent that gets
// a key of its own is FormatImage's (librbd's layered layout) and
// OpenLayers'.
func FormatAndOpen(ctx context.Context, dev Device, passphrase []byte, o FormatOptions) (*Image, error) {
	h, key, err := formatImage(ctx, dev, passphrase, o, true)
	defer clear(key)
	if err != nil {
		return nil, err
	}
	return openWithKey(ctx, dev, h, key)
}

// formatImage is FormatImage, returning the volume key too; standalone
// formats a clone as any image (see FormatAndOpen).
func formatImage(ctx context.Context, dev Device, passphrase []byte, o FormatOptions, standalone bool) (*Header, []byte, error) {
	if dev.ReadOnly() {
		return nil, nil, errors.New("luks: the image is read-only")
	}
	b, h, key, err := Format(passphrase, o)
	if err != nil {
		return nil, nil, err
	}
	if h.DataOffset >= dev.Size() {
		return nil, key, fmt.Errorf("luks: image of %d bytes too small: the encryption header needs more than %d", dev.Size(), h.DataOffset)
	}
	if !standalone && isClone(dev) {
		return h, key, formatClone(ctx, dev, b, h, o)
	}
	if _, err := dev.WriteAtContext(ctx, b, 0); err != nil {
		return nil, key, fmt.Errorf("luks: writing the header: %w", err)
	}
	if err := wipe(ctx, dev, int64(len(b)), h.DataOffset-int64(len(b))); err != nil {
		return nil, key, fmt.Errorf("luks: wiping the header area: %w", err)
	}
	return h, key, nil
}

// isClone reports whether dev is an RBD clone still attached to its
// parent.
func isClone(dev Device) bool {
	p, ok := dev.(interface {
		Parent() (*rbd.ParentSpec, int64)
	})
	if !ok {
		return false
	}
	spec, _ := p.Parent()
	return spec != nil
}

// formatClone writes the header of a clone as librbd's luks
// FormatRequest does: with the clone magic in place of the LUKS magic
// (the clone's unwritten data still reads through to its parent, which a
// plain LUKS reader would decrypt with the wrong key), and padded with
// zeroes to a whole number of alignment units (librbd's stripe period),
// so that the write covers whole objects and copies nothing up from the
// parent. The rest of the header area is left as librbd leaves it: it
// reads through to the parent's bytes, which no reader of the clone
// decrypts.
func formatClone(ctx context.Context, dev Device, b []byte, h *Header, o FormatOptions) error {
	edits, err := SwapMagic(b)
	if err != nil {
		return err
	}
	applyMagic(b, edits)
	align := o.Alignment
	if align == 0 {
		align = 1 << 20 // Format's default
	}
	padded := make([]byte, min(roundUp(int64(len(b)), align), h.DataOffset))
	copy(padded, b)
	if _, err := dev.WriteAtContext(ctx, padded, 0); err != nil {
		return fmt.Errorf("luks: writing the header: %w", err)
	}
	h.Clone = true
	return nil
}

// discarder is the optional ability of a Device to deallocate a range,
// which then reads as zeroes.
type discarder interface {
	Discard(ctx context.Context, off, length int64) error
}

// wipe makes [off, off+length) of dev read as zeroes.
func wipe(ctx context.Context, dev Device, off, length int64) error {
	if d, ok := dev.(discarder); ok {
		return d.Discard(ctx, off, length)
	}
	return fillZeroes(ctx, dev, make([]byte, min(length, zeroChunk)), off, length)
}

// fillZeroes writes [off, off+length) of w with zeros, len(zeros) bytes
// at a time.
func fillZeroes(ctx context.Context, w interface {
	WriteAtContext(ctx context.Context, p []byte, off int64) (int, error)
}, zeros []byte, off, length int64) error {
	for length > 0 {
		n := min(length, int64(len(zeros)))
		if _, err := w.WriteAtContext(ctx, zeros[:n], off); err != nil {
			return err
		}
		off, length = off+n, length-n
	}
	return nil
}
