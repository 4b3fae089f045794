package main

import (
	"errors"
	"log/slog"

	"github.com/purerbd/purerbd/csi"
)

// store is an image store the plugin closes on exit.
type store interface {
	csi.ImageStore
	Close() error
}

// newStore returns the image store of the controller role.
//
// TODO(csi/rbdstore): the adaptor over packages rados and rbd is written
// once those land; until then the controller role cannot start.
func newStore(*slog.Logger) (store, error) {
	return nil, errors.New("the RBD image store (csi/rbdstore) is not built yet")
}
