package luks

import (
	"context"
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/rbd"
)

// flattener is the flatten of an RBD image (*rbd.Image has it).
type flattener interface {
	FlattenWith(ctx context.Context, o rbd.FlattenOptions) error
}

// Flatten flattens the encrypted clone under img as librbd does with its
// encryption loaded (librbd's crypto FlattenRequest): every object the
// clone still shares is copied up through the clone's parent view (the
// parent's plaintext, encrypted with the clone's key; the header area
// as it is), then, before the clone is detached, a header that carries
// the clone magic gets the LUKS magic back, so that the flat image is
// plain LUKS for every reader. progress, when not nil, is called as
// rbd's flatten calls it.
func (img *Image) Flatten(ctx context.Context, progress func(done, total uint64)) error {
	f, ok := img.dev.(flattener)
	if !ok {
		return errors.New("luks: the image cannot be flattened")
	}
	return f.FlattenWith(ctx, rbd.FlattenOptions{Progress: progress, BeforeDetach: img.restoreMagic})
}

// restoreMagic puts the LUKS magic back into a clone's header.
func (img *Image) restoreMagic(ctx context.Context) error {
	if !img.hdr.Clone {
		return nil
	}
	edits, err := ReadMagicEdits(ctx, img.dev)
	if err != nil {
		return err
	}
	for _, e := range edits {
		if _, err := img.dev.WriteAtContext(ctx, e.New, e.Offset); err != nil {
			return fmt.Errorf("luks: restoring the LUKS magic: %w", err)
		}
	}
	if err := img.dev.Flush(ctx); err != nil {
		return fmt.Errorf("luks: restoring the LUKS magic: %w", err)
	}
	return nil
}

// ReadMagicEdits reads the header at the start of dev and returns the
// edits that swap its magic (SwapMagic).
func ReadMagicEdits(ctx context.Context, dev Device) ([]MagicEdit, error) {
	b, err := readHeaderBytes(ctx, dev, len(magic))
	if err != nil {
		return nil, err
	}
	return SwapMagic(b)
}
