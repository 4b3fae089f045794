package kernel

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Netns says whether the calling thread runs in the kernel's initial
// network namespace, which matters to the nbd driver twice: before Linux
// 6.4 its generic netlink family exists only there, and on every kernel
// it sends its LINK_DEAD notifications only there (the driver multicasts
// them into the initial namespace), so a process elsewhere subscribes
// without error and never hears of a dropped connection.
type Netns int

const (
	// NetnsUnknown: the test below could not be made (no /proc/sys).
	NetnsUnknown Netns = iota
	// NetnsInitial is the kernel's initial network namespace: the host's,
	// a Kubernetes pod's with hostNetwork: true.
	NetnsInitial
	// NetnsOther is any other, such as a pod's own without hostNetwork.
	NetnsOther
)

func (n Netns) String() string {
	switch n {
	case NetnsInitial:
		return "initial"
	case NetnsOther:
		return "not initial"
	}
	return "unknown"
}

// initOnlySysctl is a sysctl the kernel registers for the initial network
// namespace alone (net/core's global table, not its per-namespace one).
// What /proc/sys/net shows depends on the network namespace of the thread
// that looks, not on which /proc it is, so the test holds inside a
// container with its own PID namespace and /proc, where comparing
// /proc/self/ns/net with /proc/1/ns/net would only find the container's
// init.
const initOnlySysctl = "sys/net/core/netdev_max_backlog"

// CurrentNetns tells the network namespace of the calling thread from
// /proc/sys/net under procRoot ("" means /proc): net/core there with
// netdev_max_backlog is the initial namespace, net/core without it
// another one, no net/core at all unknown.
func CurrentNetns(procRoot string) Netns {
	if procRoot == "" {
		procRoot = "/proc"
	}
	_, err := os.Stat(filepath.Join(procRoot, initOnlySysctl))
	if err == nil {
		return NetnsInitial
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return NetnsUnknown
	}
	if _, err := os.Stat(filepath.Join(procRoot, filepath.Dir(initOnlySysctl))); err == nil {
		return NetnsOther
	}
	return NetnsUnknown
}
