package luks

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
)

// ReaderAt reads the image the header came from; *rbd.Image has it.
type ReaderAt interface {
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
}

// maxKeyslotArea bounds the keyslot material Unlock reads, whatever the
// header says (a 512-byte key split 4000 ways, with room to spare).
const maxKeyslotArea = 4 << 20

// Unlock returns the volume key that passphrase opens, trying every
// active keyslot in turn and reading its material from r. It returns
// ErrWrongPassphrase when none opens. The KDFs are slow on purpose;
// ctx is checked between keyslots.
func (h *Header) Unlock(ctx context.Context, r ReaderAt, passphrase []byte) ([]byte, error) {
	var firstErr error
	for _, k := range h.Keyslots {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		key, err := h.unlockSlot(ctx, r, k, passphrase)
		if err == nil {
			return key, nil
		}
		if !errors.Is(err, ErrWrongPassphrase) && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, ErrWrongPassphrase
}

func (h *Header) unlockSlot(ctx context.Context, r ReaderAt, k Keyslot, passphrase []byte) ([]byte, error) {
	afHash, err := hashByName(k.AFHash)
	if err != nil {
		return nil, err
	}
	cipher, mode := splitCipher(k.AreaCipher)
	if cipher != "aes" || mode != "xts-plain64" {
		return nil, fmt.Errorf("%w: keyslot %d cipher %q", ErrUnsupported, k.ID, k.AreaCipher)
	}
	n := int64(k.KeySize) * int64(k.Stripes)
	n = (n + 511) &^ 511
	if n > maxKeyslotArea || n > k.AreaSize || k.AreaOffset < 0 || k.AreaOffset%512 != 0 {
		return nil, fmt.Errorf("%w: keyslot %d area %d+%d", ErrCorrupt, k.ID, k.AreaOffset, k.AreaSize)
	}
	// The material first: the KDF takes seconds, and a deadline on ctx
	// should not expire between the two.
	material := make([]byte, n)
	if err := readFull(ctx, r, material, k.AreaOffset); err != nil {
		return nil, fmt.Errorf("luks: reading keyslot %d at %d: %w", k.ID, k.AreaOffset, err)
	}
	slotKey, err := k.KDF.derive(passphrase, k.AreaKeySize)
	if err != nil {
		return nil, fmt.Errorf("keyslot %d: %w", k.ID, err)
	}
	c, err := newSectorCipher(slotKey, 512, 0)
	clear(slotKey)
	if err != nil {
		return nil, fmt.Errorf("keyslot %d: %w", k.ID, err)
	}
	c.decrypt(material, material, 0)
	key := afMerge(afHash, material, k.KeySize, k.Stripes)
	clear(material)
	ok, err := h.checkKey(key)
	if err != nil {
		return nil, err
	}
	if !ok {
		clear(key)
		return nil, ErrWrongPassphrase
	}
	return key, nil
}

// checkKey tells whether key matches the header's volume key digest.
func (h *Header) checkKey(key []byte) (bool, error) {
	d := h.digest
	got, err := KDF{Type: "pbkdf2", Hash: d.hash, Iterations: d.iterations, Salt: d.salt}.derive(key, len(d.value))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, d.value) == 1, nil
}
