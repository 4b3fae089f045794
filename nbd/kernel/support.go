package kernel

import (
	"context"
	"fmt"
)

// Support is what the kernel's nbd driver offers this process, and what
// it lacks with the reason: for a log line at start and a health check,
// so that a node that can attach devices but not keep them alive says so
// before a restart or a dropped connection shows it.
type Support struct {
	// Netns is the network namespace the check ran in.
	Netns Netns
	// Netlink: the nbd generic netlink family resolves here. Without it
	// devices are attached through ioctls (see AttachConfig.Ioctl).
	Netlink bool
	// Cookies: the family knows backend cookies (Linux 5.14+), which
	// reattaching a device after a restart needs.
	Cookies bool
	// LinkDead: LINK_DEAD notifications can reach this process, so that
	// connections the kernel drops are replaced.
	LinkDead bool
	// Problems says, a sentence each, what is missing and why.
	Problems []string
}

// Degraded reports whether devices attached here lose an ability: reattach
// after a restart or replacement of dropped connections.
func (s Support) Degraded() bool { return len(s.Problems) > 0 }

// CheckSupport finds out what the nbd driver offers a process running
// where the caller runs. nbd must be loaded (LoadModule); an error means
// the check itself failed.
func CheckSupport(ctx context.Context, cfg ClientConfig) (Support, error) {
	s := Support{Netns: CurrentNetns("")}
	c, err := Open(ctx, cfg)
	switch {
	case err == nil:
		s.Netlink = true
		s.Cookies = c.BackendIdentifierSupported()
		c.Close()
	case IoctlOnly(err, cfg.SysfsRoot):
		s.Problems = append(s.Problems, MissingFamilyCause(s.Netns)+
			": devices are attached through ioctls, cannot be reattached after a restart, and connections the kernel drops are not replaced")
		return s, nil
	default:
		return s, fmt.Errorf("nbd: checking the kernel's nbd interface: %w", err)
	}
	if !s.Cookies {
		s.Problems = append(s.Problems, "the kernel predates nbd backend cookies (Linux 5.14): devices cannot be reattached after a restart")
	}
	s.LinkDead = s.Netns != NetnsOther
	if !s.LinkDead {
		s.Problems = append(s.Problems, linkDeadProblem)
	}
	return s, nil
}

// MissingFamilyCause explains, for a process in network namespace ns,
// why the nbd netlink family does not resolve although nbd is loaded.
func MissingFamilyCause(ns Netns) string {
	switch ns {
	case NetnsOther:
		return "the nbd netlink family is not visible in this network namespace " +
			"(Linux before 6.4 registers it in the initial namespace only): " +
			"run in the host's network namespace (Kubernetes: hostNetwork: true)"
	case NetnsInitial:
		return "the kernel has no nbd netlink family (Linux before 4.12)"
	}
	return "the nbd netlink family is not visible here: probably this is not the initial network namespace " +
		"(Linux before 6.4 registers the family there only; Kubernetes: hostNetwork: true), or the kernel predates Linux 4.12"
}

// linkDeadProblem is why a process outside the initial network namespace
// never hears of dropped connections.
const linkDeadProblem = "the nbd driver sends its LINK_DEAD notifications into the initial network namespace only, " +
	"and this is another network namespace: connections the kernel drops will not be replaced " +
	"(run in the host's network namespace; Kubernetes: hostNetwork: true)"
