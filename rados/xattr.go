package rados

import (
	"context"

	"github.com/purerbd/purerbd/rados/osdc"
)

// GetXattr returns an extended attribute's value (ErrNoData when the
// object has no such attribute).
func (io *IOContext) GetXattr(ctx context.Context, oid, name string) ([]byte, error) {
	rep, err := io.do(ctx, oid, 0, osdc.GetXattr(name))
	if err != nil {
		return nil, err
	}
	return rep.Ops[0].OutData, nil
}

// SetXattr sets an extended attribute (creating the object).
func (io *IOContext) SetXattr(ctx context.Context, oid, name string, value []byte) error {
	_, err := io.do(ctx, oid, 0, osdc.SetXattr(name, value))
	return err
}

// ListXattrs returns every extended attribute of the object.
func (io *IOContext) ListXattrs(ctx context.Context, oid string) (map[string][]byte, error) {
	rep, err := io.do(ctx, oid, 0, osdc.GetXattrs())
	if err != nil {
		return nil, err
	}
	return osdc.ParseXattrs(rep.Ops[0].OutData)
}

// RmXattr removes an extended attribute.
func (io *IOContext) RmXattr(ctx context.Context, oid, name string) error {
	_, err := io.do(ctx, oid, 0, osdc.RmXattr(name))
	return err
}
