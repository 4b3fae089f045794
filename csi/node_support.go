package csi

import (
	"context"
	"fmt"
	"slices"

	"github.com/purerbd/purerbd/csi/internal/nodestate"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// checkKernel finds out what the kernel's nbd driver offers this process
// and says so in the log; what it lacks becomes the node's warnings
// (Warnings), which Probe passes on to the health endpoint. Such a node
// still attaches devices, so it stays ready: a restart would not give it
// what the kernel or its network namespace withholds.
func (n *NodeServer) checkKernel(ctx context.Context) {
	s, err := kernel.CheckSupport(ctx, kernel.ClientConfig{SysfsRoot: n.cfg.Module.SysfsRoot})
	var warnings []string
	if err != nil {
		warnings = []string{"cannot tell what the kernel's nbd interface offers: " + err.Error()}
	} else {
		n.log.Info("nbd kernel interface", "netns", s.Netns.String(), "netlink", s.Netlink,
			"cookies", s.Cookies, "linkDead", s.LinkDead)
		warnings = s.Problems
	}
	for _, w := range warnings {
		n.log.Warn("node degraded: " + w)
	}
	n.mu.Lock()
	n.warnings = warnings
	n.mu.Unlock()
}

// Warnings says, a sentence each, what this node lacks although it
// works: attaching through ioctls, no reattach after a restart, no
// replacement of dropped connections, and why. Empty before Start.
func (n *NodeServer) Warnings() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.warnings)
}

// checkUblk probes the kernel's ublk driver, unless the node serves
// NBD only, and says in the log which device new volumes get. A node
// told to serve ublk fails when the kernel cannot; a node left on auto
// falls back on NBD. A node told to serve NBD probes only when its
// state (recs) holds ublk volumes to take over.
func (n *NodeServer) checkUblk(ctx context.Context, recs []*nodestate.Record) error {
	if n.cfg.DeviceType == DeviceNBD && !slices.ContainsFunc(recs, (*nodestate.Record).Ublk) {
		n.mu.Lock()
		n.ublk = ublkSupport{why: "the node serves NBD only (--device-type nbd)"}
		n.mu.Unlock()
		n.log.Info("device type", "configured", n.cfg.DeviceType, "volumes", DeviceNBD)
		return nil
	}
	u := n.probeUblk(ctx)
	n.mu.Lock()
	n.ublk = u
	n.mu.Unlock()
	if n.cfg.DeviceType == DeviceUblk && !u.usable {
		return fmt.Errorf("--device-type ublk: %s", u.why)
	}
	chosen, err := n.deviceTypeFor("")
	if err != nil {
		return err
	}
	n.log.Info("device type", "configured", n.cfg.DeviceType, "volumes", chosen, "ublk", u.usable, "ublkResize", u.resize, "ublkMissing", u.why)
	return nil
}
