package chaostest

import (
	"context"
	"fmt"

	"github.com/purerbd/purerbd/rbd"
)

// target is one way of reaching an image's bytes.
type target interface {
	readAt(ctx context.Context, p []byte, off int64) error
	writeAt(ctx context.Context, p []byte, off int64) error
	// zero makes a range read as zeroes (discard, write zeroes, trim).
	zero(ctx context.Context, off, n int64, how int) error
	flush(ctx context.Context) error
}

// rbdTarget is the rbd library itself.
type rbdTarget struct {
	img *rbd.Image
}

func (t *rbdTarget) readAt(ctx context.Context, p []byte, off int64) error {
	n, err := t.img.ReadAtContext(ctx, p, off)
	if err == nil && n != len(p) {
		err = fmt.Errorf("short read: %d of %d bytes", n, len(p))
	}
	return err
}

func (t *rbdTarget) writeAt(ctx context.Context, p []byte, off int64) error {
	n, err := t.img.WriteAtContext(ctx, p, off)
	if err == nil && n != len(p) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(p))
	}
	return err
}

func (t *rbdTarget) zero(ctx context.Context, off, n int64, how int) error {
	if how%2 == 0 {
		return t.img.Discard(ctx, off, n)
	}
	return t.img.WriteZeroes(ctx, off, n)
}

func (t *rbdTarget) flush(ctx context.Context) error { return t.img.Flush(ctx) }
