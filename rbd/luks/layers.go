package luks

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/rbd"
)

// Layered encryption, as librbd (Ceph 17 and later) loads it with
// rbd_encryption_load2: a clone of an encrypted image may be formatted
// with a key (and format) of its own, and is then opened with a list of
// specs, the clone's first and then each ancestor's. An ancestor past
// the end of the list is tried with the last spec; when that ancestor
// has no LUKS header it is taken for plaintext, and so are its own
// ancestors. A clone that was never formatted reads its parent's header
// through and so shares the parent's encryption.

// Spec is one layer's encryption, as rbd's --encryption-format and
// --encryption-passphrase-file give it.
type Spec struct {
	// Version is 1 or 2 to require that LUKS version, or 0 for either
	// (rbd's luks1, luks2 and luks).
	Version    int
	Passphrase []byte
}

// chainDevice is what OpenLayers needs of an RBD image beyond a Device:
// its parent snapshot, and the hook through which the clone's shared
// data is read from it (*rbd.Image has both).
type chainDevice interface {
	Device
	ParentImage() *rbd.Image
	SetParentData(fn rbd.ParentData)
}

// layer is one opened layer of a chain.
type layer struct {
	hdr *Header
	c   *sectorCipher
	key []byte
}

// OpenLayers opens the encryption of dev and of its ancestors with
// specs, dev's first, as librbd's encryption load does, and returns the
// plaintext view of dev. The data dev still shares with its parent is
// then read with the parent's key from the parent's data area and, when
// dev's encryption differs from its parent's, re-encrypted with dev's
// key on the way, so that a copy-up writes it as librbd does.
//
// A Device that is not an RBD image has no ancestors. More specs than
// layers is ErrSpecCount; a failure of one layer is a *LayerError (a
// wrong passphrase wraps ErrWrongPassphrase, a layer given a spec that
// has no LUKS header ErrNotLUKS).
func OpenLayers(ctx context.Context, dev Device, specs []Spec) (*Image, error) {
	if len(specs) == 0 {
		return nil, errors.New("luks: no encryption spec")
	}
	devs := []Device{dev}
	for d := dev; ; {
		c, ok := d.(chainDevice)
		if !ok {
			break
		}
		p := c.ParentImage()
		if p == nil {
			break
		}
		devs = append(devs, p)
		d = p
	}
	if len(specs) > len(devs) {
		return nil, fmt.Errorf("%w: %d specs for an image with %d ancestors", ErrSpecCount, len(specs), len(devs)-1)
	}
	var layers []layer
	defer func() {
		for _, l := range layers {
			clear(l.key)
		}
	}()
	for i, d := range devs {
		spec, assumed := specs[min(i, len(specs)-1)], i >= len(specs)
		l, err := openLayer(ctx, d, i+1 < len(devs), spec, layers, i > 0 && (assumed || bytes.Equal(spec.Passphrase, specs[i-1].Passphrase)))
		if assumed && errors.Is(err, errNoMagic) {
			break // a plaintext ancestor, and so are its own
		}
		if err != nil {
			return nil, &LayerError{Layer: i, Image: nameOf(d), Assumed: assumed, Err: err}
		}
		layers = append(layers, l)
	}
	for i := range layers {
		if i+1 >= len(devs) {
			break
		}
		c := devs[i].(chainDevice)
		var parent *layer
		if i+1 < len(layers) {
			parent = &layers[i+1]
		}
		if parent != nil && sameEncryption(&layers[i], parent) {
			// a clone that inherits its parent's encryption reads the
			// parent's bytes as they are
			c.SetParentData(nil)
			continue
		}
		v := &parentView{parent: devs[i+1], child: layers[i].c, childOffset: layers[i].hdr.DataOffset, sector: 512}
		if parent != nil {
			v.cipher, v.offset, v.sector = parent.c, parent.hdr.DataOffset, parent.hdr.SectorSize
		}
		c.SetParentData(v.read)
	}
	return openWithKey(ctx, dev, layers[0].hdr, layers[0].key)
}

// openLayer reads and unlocks the header of one layer. prev are the
// layers below it, opened already; reuse allows the key of the layer
// below to be tried first (it was opened with the same passphrase), which
// spares a clone that inherits its parent's header a second slow KDF.
func openLayer(ctx context.Context, d Device, hasParent bool, spec Spec, prev []layer, reuse bool) (layer, error) {
	h, err := ReadHeader(ctx, d)
	if err != nil {
		return layer{}, err
	}
	if h.Clone && !hasParent {
		return layer{}, fmt.Errorf("%w: an encrypted clone's header on an image without a parent", ErrCorrupt)
	}
	if err := h.fits(spec.Version, d.Size()); err != nil {
		return layer{}, err
	}
	if r, ok := d.(interface {
		Stat(ctx context.Context) (rbd.Info, error)
	}); ok {
		// librbd maps the data area a whole stripe period at a time and
		// refuses a header whose data offset is not a whole number of
		// them ("incompatible stripe pattern")
		st, err := r.Stat(ctx)
		if err != nil {
			return layer{}, fmt.Errorf("luks: %w", err)
		}
		if period := int64(st.ObjectSize) * int64(max(st.StripeCount, 1)); period > 0 && h.DataOffset%period != 0 {
			return layer{}, fmt.Errorf("%w: data offset %d is not a whole number of the image's %d-byte stripe periods", ErrUnsupported, h.DataOffset, period)
		}
	}
	var key []byte
	if reuse && len(prev) > 0 {
		below := prev[len(prev)-1]
		if below.hdr.UUID == h.UUID && len(below.key) == h.KeySize {
			if ok, err := h.checkKey(below.key); err == nil && ok {
				key = bytes.Clone(below.key)
			}
		}
	}
	if key == nil {
		if key, err = h.Unlock(ctx, d, spec.Passphrase); err != nil {
			return layer{}, err
		}
	}
	c, err := newSectorCipher(key, h.SectorSize, h.IVTweak)
	if err != nil {
		clear(key)
		return layer{}, err
	}
	return layer{hdr: h, c: c, key: key}, nil
}

// sameEncryption reports whether two layers encrypt alike: the same key,
// sectors, tweak and data offset.
func sameEncryption(a, b *layer) bool {
	return bytes.Equal(a.key, b.key) && a.hdr.SectorSize == b.hdr.SectorSize &&
		a.hdr.IVTweak == b.hdr.IVTweak && a.hdr.DataOffset == b.hdr.DataOffset
}

// nameOf names a layer's image for errors.
func nameOf(d Device) string {
	if n, ok := d.(interface{ Name() string }); ok {
		return n.Name()
	}
	return ""
}
