package main

import (
	"log/slog"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
)

// store is an image store the plugin closes on exit.
type store interface {
	csi.ImageStore
	Close() error
}

// newStore returns the image store of the controller role: RADOS and RBD
// through packages rados and rbd.
func newStore(log *slog.Logger) (store, error) {
	return rbdstore.New(rbdstore.Options{Logger: log}), nil
}
