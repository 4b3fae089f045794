package rbd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
)

// Pool initialisation as librbd's Pool::init and ValidatePoolRequest do
// it (rbd pool init): the pool is tagged with the rbd application, and,
// once, a self-managed snapshot id is allocated and released (putting
// the pool in self-managed snapshot mode, which fails on a pool with
// pool snapshots) around writing the pool's rbd_info object, whose
// final "overwrite validated" says the pool takes overwrites.

// infoObject is RBD_INFO.
const infoObject = "rbd_info"

const (
	infoValidate  = "validate"
	infoValidated = "overwrite validated"
)

// InitPool prepares ioc's pool for RBD images. force enables the rbd
// application even when the pool has another one (the monitors refuse
// that with EPERM otherwise).
func InitPool(ctx context.Context, ioc *rados.IOContext, force bool) error {
	if ioc == nil {
		return fmt.Errorf("%w: nil I/O context", ErrInvalid)
	}
	if err := ioc.Conn().EnableApplication(ctx, ioc.PoolName(), "rbd", force); err != nil {
		return fmt.Errorf("rbd: initializing pool %q: %w", ioc.PoolName(), err)
	}
	o, err := adapt(ioc.WithNamespace(""))
	if err != nil {
		return err
	}
	return validatePool(ctx, o)
}

// validatePool is ValidatePoolRequest.
func validatePool(ctx context.Context, o objects) error {
	r := rados.NewReadOp()
	rd := r.Read(0, 0)
	err := o.read(ctx, infoObject, noSnap, r)
	switch {
	case err == nil && bytes.Equal(rd.Data, []byte(infoValidated)):
		return nil
	case err == nil && bytes.Equal(rd.Data, []byte(infoValidate)):
		// the snapshot was made by an earlier, interrupted validation
		return overwriteInfo(ctx, o)
	case err != nil && !errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("rbd: reading %s: %w", infoObject, err)
	}
	snap, err := o.allocSnap(ctx)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("%w: pool not configured for self-managed snapshots (it has pool snapshots): %w", ErrInvalid, err)
		}
		return fmt.Errorf("rbd: allocating a self-managed snapshot: %w", err)
	}
	w := rados.NewWriteOp()
	w.Create(true)
	w.Write([]byte(infoValidate), 0)
	werr := o.write(ctx, infoObject, denc.SnapContext{}, w)
	switch {
	case errors.Is(werr, syscall.EOPNOTSUPP):
		werr = fmt.Errorf("%w: pool missing required overwrite support", ErrInvalid)
	case errors.Is(werr, syscall.EEXIST):
		werr = nil
	case werr != nil:
		werr = fmt.Errorf("rbd: writing %s: %w", infoObject, werr)
	}
	// as librbd: a snapshot id left allocated is not an error
	_ = o.releaseSnap(ctx, snap)
	if werr != nil {
		return werr
	}
	return overwriteInfo(ctx, o)
}

func overwriteInfo(ctx context.Context, o objects) error {
	w := rados.NewWriteOp()
	w.Write([]byte(infoValidated), 0)
	err := o.write(ctx, infoObject, denc.SnapContext{}, w)
	if errors.Is(err, syscall.EOPNOTSUPP) {
		return fmt.Errorf("%w: pool missing required overwrite support", ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("rbd: validating overwrite support: %w", err)
	}
	return nil
}
