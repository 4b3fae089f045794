package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
	"github.com/purerbd/purerbd/internal/predecessor"
	"github.com/purerbd/purerbd/rados"
)

// defaultCephConf is where ceph-csi's manifests mount the ceph-config
// ConfigMap's ceph.conf, and where purerbd's mount it too.
const defaultCephConf = "/etc/ceph/ceph.conf"

// store is the plugin's way to Ceph, closed on exit: the controller's
// image store and the node's image opener.
type store interface {
	csi.ImageStore
	csi.ImageOpener
	sessionSource
	Close() error
}

// newStore returns the store over RADOS and RBD (packages rados and rbd).
//
// The node plugin (node) reaches a cluster from the network namespace
// its config.json entry names (netNamespaceFilePath), as ceph-csi's
// node plugin runs rbd map there; a process with both roles does so for
// the controller's connections too.
//
// With read affinity (--enable-read-affinity, or a cluster's
// readAffinity in config.json) the node reads from the OSDs nearest to
// the CRUSH location its labels make.
func newStore(log *slog.Logger, all options, claim *predecessor.Claim, node bool, labels map[string]string) (store, error) {
	o := all.ceph
	opts, err := storeOptions(o)
	if err != nil {
		return nil, err
	}
	opts.Logger = log
	opts.Predecessor = claim
	opts.NetNamespaces = node
	if node {
		opts.ReadAffinity = all.readAffinity
		opts.CrushLocationLabels = splitList(all.crushLabels)
		opts.NodeLabels = labels
		if all.readAffinity {
			log.Info("read affinity", "crush_location", csi.CrushLocation(opts.CrushLocationLabels, labels))
		}
	}
	mon, osd := opts.Modes("")
	conf := ""
	if opts.Conf != nil {
		conf = o.conf
	}
	log.Info("Ceph connection modes (empty: Ceph's defaults)", "ceph_conf", conf, "monitors", mon, "osds", osd)
	return rbdstore.New(opts), nil
}

// storeOptions maps the Ceph flags onto the store's options: ceph.conf
// is read when present; a missing file is an error only when
// --ceph-conf named it (the ConfigMap is optional).
func storeOptions(o cephOptions) (rbdstore.Options, error) {
	opts := rbdstore.Options{MsMode: o.msMode}
	if o.conf != "" {
		c, err := rados.LoadConfFile(o.conf)
		switch {
		case err == nil:
			opts.Conf = c
		case errors.Is(err, fs.ErrNotExist) && !o.confGiven:
		default:
			return opts, fmt.Errorf("--ceph-conf: %w", err)
		}
	}
	if err := opts.Check(); err != nil {
		return opts, fmt.Errorf("connection modes (--ms-mode, --ceph-conf %s): %w", o.conf, err)
	}
	return opts, nil
}
