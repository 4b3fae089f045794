package luks

import (
	"context"
	"fmt"
)

// Discards and write zeroes on an encrypted image: what reads as zeroes
// through librbd's crypto layer as well as here.

// zeroChunk is the size of the encrypted zero writes of Discard.
const zeroChunk = 1 << 20

// Discard makes [off, off+length) read as zeroes. Whole objects of an
// RBD image without a parent are removed: an object that does not exist
// reads as zeroes through librbd's crypto layer too, without decryption.
// The rest is written with encrypted zeroes, as librbd's crypto layer
// turns a discard into a write of zeroes: a truncated or zeroed part of
// an object that exists would read as noise through librbd.
func (img *Image) Discard(ctx context.Context, off, length int64) error {
	if off < 0 || length < 0 || off+length > img.Size() {
		return fmt.Errorf("luks: discard of %d bytes at %d outside the image's %d", length, off, img.Size())
	}
	if r, ok := img.dev.(rbdImage); ok && img.objectSize > 0 {
		if spec, _ := r.Parent(); spec == nil {
			a, b := roundUp(off, img.objectSize), (off+length)/img.objectSize*img.objectSize
			if a < b {
				if err := img.writeZeroes(ctx, off, a-off); err != nil {
					return err
				}
				if err := r.Discard(ctx, img.hdr.DataOffset+a, b-a); err != nil {
					return err
				}
				return img.writeZeroes(ctx, b, off+length-b)
			}
		}
	}
	return img.writeZeroes(ctx, off, length)
}

// writeZeroes writes encrypted zeroes over [off, off+length).
func (img *Image) writeZeroes(ctx context.Context, off, length int64) error {
	buf := img.zeros.Get().(*[zeroChunk]byte)
	defer img.zeros.Put(buf)
	return fillZeroes(ctx, img, buf[:], off, length)
}

// WriteZeroes is Discard: the range reads as zeroes, deallocated where
// it can be.
func (img *Image) WriteZeroes(ctx context.Context, off, length int64) error {
	return img.Discard(ctx, off, length)
}
