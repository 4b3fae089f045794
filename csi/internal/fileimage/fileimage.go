// Package fileimage stands a file in for an RBD image where the CSI node
// is tested without a cluster: an nbd.File with the methods the node
// serves an image by (rbdnbd.Image) and Close, so that the node's device
// has the abilities it has on RBD.
package fileimage

import (
	"context"
	"fmt"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/rbdnbd"
)

// Image is a file served as an RBD image would be.
type Image struct {
	*nbd.File
	path string
}

var _ rbdnbd.Image = Image{}

// Open opens the file at path as an image.
func Open(path string, readOnly bool) (Image, error) {
	f, err := nbd.OpenFile(path, readOnly)
	if err != nil {
		return Image{}, err
	}
	return Image{File: f, path: path}, nil
}

func (i Image) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	return i.File.ReadAt(ctx, p, off)
}

func (i Image) WriteAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	return i.File.WriteAt(ctx, p, off)
}

// Discard punches a hole, as rbd.Image.Discard removes objects.
func (i Image) Discard(ctx context.Context, off, length int64) error {
	return i.File.Trim(ctx, off, length)
}

// WriteZeroes punches a hole where the file system can, else zeroes.
func (i Image) WriteZeroes(ctx context.Context, off, length int64) error {
	return i.File.Zero(ctx, off, length, 0)
}

// AllocatedExtents reports the file's holes (SEEK_HOLE) and data, clipped
// to the file's size, as rbd.Image.AllocatedExtents reports objects.
func (i Image) AllocatedExtents(ctx context.Context, off, length int64, fn func(off, length int64, allocated bool) error) error {
	end := min(off+length, i.Size())
	if off >= end {
		return nil
	}
	ext, err := i.File.BlockStatus(ctx, off, end-off)
	if err != nil {
		return fmt.Errorf("allocation of %s: %w", i.path, err)
	}
	for _, e := range ext {
		n := min(e.Length, end-off)
		if err := fn(off, n, e.Flags&nbd.ExtentHole == 0); err != nil {
			return err
		}
		if off += n; off >= end {
			break
		}
	}
	return nil
}
