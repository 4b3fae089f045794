package csi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A class's mapOptions and unmapOptions, in ceph-csi's form:
//
//	mapOptions: "krbd:lock_on_read,queue_depth=1024;nbd:io-timeout=60"
//
// one section per mounter, a section without a mounter being krbd's.
// purerbd maps as ceph-csi's rbd-nbd mounter does, so the nbd section
// applies and the krbd section is ignored, as ceph-csi ignores it for
// rbd-nbd volumes. The nbd options are rbd-nbd's command line options
// without the dashes; purerbd honours the two that tune the kernel's
// NBD device per volume and refuses, saying why, those that would ask
// for something it does not do.

// nbdOptions are the per-volume settings of a volume's NBD device; zero
// fields keep the node's (--nbd-io-timeout, --nbd-reattach-timeout).
type nbdOptions struct {
	// IOTimeout is the kernel's request timeout (rbd-nbd's io-timeout).
	IOTimeout time.Duration
	// ReattachTimeout is how long the kernel holds I/O for a restarted
	// plugin (rbd-nbd's reattach-timeout).
	ReattachTimeout time.Duration
}

// maxNBDTimeout bounds the timeouts a class may set: a day is far past
// any useful value and keeps the kernel's tick count from overflowing.
const maxNBDTimeout = 24 * time.Hour

// nbdNoOps are rbd-nbd map options that purerbd accepts and that change
// nothing, with why.
var nbdNoOps = map[string]string{
	"try-netlink": "purerbd always attaches over netlink where the kernel has it",
	"show-cookie": "purerbd names every device by its volume ID",
	"exclusive":   "purerbd holds the image's exclusive lock for single-node access modes itself",
	"nbds_max":    "a parameter of the nbd module, fixed when it loads, not of a volume",
	"max_part":    "a parameter of the nbd module, fixed when it loads, not of a volume",
}

// nbdRefused are rbd-nbd map options that purerbd refuses, with why and
// what to do instead.
var nbdRefused = map[string]string{
	"read-only":                  "the access mode decides: use a ReadOnlyMany claim or readOnly in the pod",
	"notrim":                     "purerbd passes discards on to RBD, which frees the space; mount without discard to avoid them",
	"quiesce":                    "purerbd does not freeze file systems around RBD snapshots",
	"quiesce-hook":               "purerbd does not freeze file systems around RBD snapshots",
	"encryption-format":          "purerbd does not encrypt volumes yet",
	"encryption-passphrase-file": "purerbd does not encrypt volumes yet",
	"device":                     "purerbd picks a free /dev/nbdN itself",
	"cookie":                     "purerbd names every device by its volume ID, to take it over after a restart",
	"snap":                       "a volume maps its image's head; make a volume from the snapshot instead",
	"snap-id":                    "a volume maps its image's head; make a volume from the snapshot instead",
}

// mapSections splits a mapOptions or unmapOptions value into its krbd
// and nbd option lists. As in ceph-csi, a later section of a mounter
// replaces an earlier one and an unknown mounter is an error.
func mapSections(key, v string) (krbd, nbd []string, err error) {
	for _, item := range strings.Split(v, ";") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		mounter, opts, ok := strings.Cut(item, ":")
		if !ok {
			krbd = splitOptions(item)
			continue
		}
		switch strings.ToLower(strings.TrimSpace(mounter)) {
		case "krbd":
			krbd = splitOptions(opts)
		case "nbd":
			nbd = splitOptions(opts)
		default:
			return nil, nil, fmt.Errorf("%s: unknown mounter %q in %q (sections are krbd:... and nbd:..., separated by ';')", key, strings.TrimSpace(mounter), item)
		}
	}
	return krbd, nbd, nil
}

// splitOptions splits "a,b=1,--c" into options without leading dashes.
func splitOptions(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		o = strings.TrimPrefix(strings.TrimSpace(o), "--")
		if o != "" {
			out = append(out, o)
		}
	}
	return out
}

// parseMapOptions checks a mapOptions value and returns the NBD settings
// its nbd section gives.
func parseMapOptions(v string) (nbdOptions, error) {
	var o nbdOptions
	_, nbd, err := mapSections(paramMapOptions, v)
	if err != nil {
		return o, err
	}
	for _, opt := range nbd {
		name, val, hasVal := strings.Cut(opt, "=")
		switch name {
		case "io-timeout", "timeout": // timeout: rbd-nbd's older name
			d, err := nbdTimeout(name, val, hasVal)
			if err != nil {
				return o, err
			}
			o.IOTimeout = d
		case "reattach-timeout":
			d, err := nbdTimeout(name, val, hasVal)
			if err != nil {
				return o, err
			}
			o.ReattachTimeout = d
		default:
			if _, ok := nbdNoOps[name]; ok {
				continue
			}
			if why, ok := nbdRefused[name]; ok {
				return o, fmt.Errorf("%s: nbd option %q is not supported: %s", paramMapOptions, name, why)
			}
			return o, fmt.Errorf("%s: nbd option %q is not known to purerbd (it honours io-timeout and reattach-timeout, and accepts %s, which change nothing here)",
				paramMapOptions, name, strings.Join(sortedKeys(nbdNoOps), ", "))
		}
	}
	return o, nil
}

// nbdTimeout parses the whole seconds of an rbd-nbd timeout option.
func nbdTimeout(name, val string, hasVal bool) (time.Duration, error) {
	if !hasVal {
		return 0, fmt.Errorf("%s: nbd option %s needs a value in seconds (%s=60)", paramMapOptions, name, name)
	}
	n, err := strconv.ParseUint(val, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s: nbd option %s=%q is not a whole number of seconds", paramMapOptions, name, val)
	}
	d := time.Duration(n) * time.Second
	switch {
	case n == 0 && name == "reattach-timeout":
		return 0, fmt.Errorf("%s: nbd option reattach-timeout=0 would fail every I/O the moment the plugin restarts; give at least 1 second (the node's default is %v)",
			paramMapOptions, DefaultReattachTimeout)
	case n == 0:
		return 0, fmt.Errorf("%s: nbd option %s=0: no request timeout is the node's own default (requests wait for the plugin and are resent once it restarted); leave %s out for it, or give at least 1 second",
			paramMapOptions, name, name)
	case d > maxNBDTimeout:
		return 0, fmt.Errorf("%s: nbd option %s=%d is more than a day", paramMapOptions, name, n)
	}
	return d, nil
}

// checkUnmapOptions checks the form of an unmapOptions value. Its
// options change nothing: purerbd unmaps by flushing and disconnecting
// the device it serves, with nothing to tune, and never runs krbd.
func checkUnmapOptions(v string) error {
	_, _, err := mapSections(paramUnmapOptions, v)
	return err
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
