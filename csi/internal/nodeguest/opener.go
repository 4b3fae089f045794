package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/internal/fileimage"
)

// fileOpener stands in for RBD in "scenario" ("rbd-scenario" runs
// purerbd-csi on a real cluster): the image of a volume is the file <dir>/<pool>/<namespace>/<image>. The
// exclusive lock is an flock(2), which the kernel drops when its holder
// dies, as Ceph breaks the lock of a dead client.
type fileOpener struct {
	dir string
	key string // the only key accepted
}

func (o *fileOpener) OpenImage(ctx context.Context, c csi.Cluster, cred csi.Credentials, vol csi.VolumeID, opts csi.OpenImageOptions) (csi.NodeImage, error) {
	if cred.Key != o.key {
		return nil, fmt.Errorf("%w: %s", csi.ErrUnauthenticated, cred)
	}
	p := filepath.Join(o.dir, strconv.FormatInt(vol.Pool, 10), vol.Namespace, vol.Image)
	if _, err := os.Stat(p); err != nil {
		return nil, fmt.Errorf("%w: image %s", csi.ErrNotFound, vol.Image)
	}
	f, err := fileimage.Open(p, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	if !opts.ReadOnly {
		// A second descriptor for the lock: nbd.File keeps its own.
		lf, err := os.Open(p)
		if err != nil {
			f.Close()
			return nil, err
		}
		how := unix.LOCK_SH
		if opts.Exclusive {
			how = unix.LOCK_EX
		}
		if err := unix.Flock(int(lf.Fd()), how|unix.LOCK_NB); err != nil {
			lf.Close()
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: image %s is locked by another client", csi.ErrBusy, vol.Image)
			}
			return nil, err
		}
		return &fileImage{Image: f, path: p, lock: lf}, nil
	}
	return &fileImage{Image: f, path: p}, nil
}

// fileImage is a csi.NodeImage over a file whose I/O can be stalled.
type fileImage struct {
	fileimage.Image
	path string
	lock *os.File
}

func (f *fileImage) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if err := stalled(ctx); err != nil {
		return 0, err
	}
	return f.Image.ReadAtContext(ctx, p, off)
}

func (f *fileImage) WriteAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if err := stalled(ctx); err != nil {
		return 0, err
	}
	return f.Image.WriteAtContext(ctx, p, off)
}

// stallPath, while it exists, holds every I/O: a cluster that stopped
// answering.
const stallPath = "/tmp/stall"

func stalled(ctx context.Context) error {
	for {
		if _, err := os.Stat(stallPath); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Refresh picks up a size change made by "the controller" (the scenario
// truncating the file), as rbd.Image.Refresh rereads the header.
func (f *fileImage) Refresh(ctx context.Context) error {
	st, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	if st.Size() != f.Size() {
		return f.File.Resize(ctx, st.Size())
	}
	return nil
}

func (f *fileImage) Close() error {
	err := f.File.Close()
	if f.lock != nil {
		f.lock.Close()
	}
	return err
}
