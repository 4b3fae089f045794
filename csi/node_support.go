package csi

import (
	"context"
	"slices"

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
