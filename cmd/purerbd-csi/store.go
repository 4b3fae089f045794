package main

import (
	"log/slog"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
)

// store is the plugin's way to Ceph, closed on exit: the controller's
// image store and the node's image opener.
type store interface {
	csi.ImageStore
	csi.ImageOpener
	Close() error
}

// newStore returns the store over RADOS and RBD (packages rados and rbd).
func newStore(log *slog.Logger) (store, error) {
	return rbdstore.New(rbdstore.Options{Logger: log}), nil
}
