package luks

import (
	"context"
)

// parentView is how a clone with an encryption of its own sees the data
// it still shares with its parent, as librbd's crypto layer maps it: the
// clone's plaintext offset q is the parent's plaintext offset q (the two
// data areas start at different image offsets when the headers differ in
// size), read and decrypted with the parent's key and encrypted with the
// clone's. The clone's header area below its data offset is not
// encrypted by the clone's layer and reads the parent's bytes as they
// are. Parent data past the end of the parent's data area reads as
// zeroes.
//
// A sector the parent never wrote (all-zero ciphertext) stays all
// zeroes: a hole reads as zeroes through the clone too, and a copy-up
// leaves it unwritten, as librbd's copy-up writes only the parent's data
// extents.
type parentView struct {
	parent      Device        // the parent snapshot, raw
	child       *sectorCipher // the clone's data cipher
	childOffset int64         // the clone's data offset
	// cipher, offset and sector are the parent's data cipher, data
	// offset and sector size; cipher is nil for a plaintext parent,
	// whose data area is the whole image.
	cipher *sectorCipher
	offset int64
	sector int
}

// read is the clone's rbd.ParentData: len(p) bytes of the clone's image
// at off.
func (v *parentView) read(ctx context.Context, p []byte, off int64) error {
	if off < v.childOffset {
		n := min(int64(len(p)), v.childOffset-off)
		if err := v.readRaw(ctx, p[:n], off); err != nil {
			return err
		}
		p, off = p[n:], off+n
		if len(p) == 0 {
			return nil
		}
	}
	q := off - v.childOffset
	cs, ps := int64(v.child.sectorSize), int64(v.sector)
	align := max(cs, ps)
	start, end := q/align*align, roundUp(q+int64(len(p)), align)
	buf := make([]byte, end-start)
	// the parent's sectors that exist, whole
	n := (min(end, v.parent.Size()-v.offset) - start) / ps * ps
	holes := make([]bool, (end-start)/ps)
	for i := range holes {
		holes[i] = int64(i)*ps >= n
	}
	if n > 0 {
		if err := v.readRaw(ctx, buf[:n], start+v.offset); err != nil {
			return err
		}
		for i := int64(0); i < n; i += ps {
			s := buf[i : i+ps]
			if allZero(s) {
				holes[i/ps] = true
			} else if v.cipher != nil {
				v.cipher.decrypt(s, s, start+i)
			}
		}
	}
	for i := int64(0); i < end-start; i += cs {
		// a clone sector is written unless every parent sector it
		// covers (or the one that covers it) is a hole
		first, last := i/ps, (i+cs-1)/ps
		written := false
		for j := first; j <= last; j++ {
			written = written || !holes[j]
		}
		if written {
			v.child.encrypt(buf[i:i+cs], buf[i:i+cs], start+i)
		}
	}
	copy(p, buf[q-start:])
	return nil
}

// readRaw reads the parent's raw bytes, zeroes past its end.
func (v *parentView) readRaw(ctx context.Context, p []byte, off int64) error {
	size := v.parent.Size()
	n := int64(0)
	if off < size {
		n = min(int64(len(p)), size-off)
		if err := readFull(ctx, v.parent, p[:n], off); err != nil {
			return err
		}
	}
	clear(p[n:])
	return nil
}
