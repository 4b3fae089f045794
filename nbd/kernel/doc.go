// Package kernel attaches NBD exports to the Linux kernel through the nbd
// generic-netlink family.
//
// Attach serves a Backend with the package nbd server on one end of a
// socketpair per connection and hands the other ends to the kernel
// (NBD_CMD_CONNECT), which then shows the export as /dev/nbdN. A backend
// cookie (NBD_ATTR_BACKEND_IDENTIFIER, Linux 5.14+) names the device, so a
// new process can find it again after the old one died and Reattach fresh
// sockets into it (NBD_CMD_RECONFIGURE): I/O that waited for the dead
// server resumes and nothing is lost, as long as the kernel's dead
// connection timeout has not run out. Device.Resize changes the size
// online, Device.Detach disconnects (NBD_CMD_DISCONNECT).
//
// A served device also replaces connections the kernel gives up on by
// itself: when a request outlives the request timeout, the kernel shuts
// that request's connection, resends the request on another and
// announces the dead link (NBD_CMD_LINK_DEAD on the family's multicast
// group); the device answers with a fresh socket (RECONFIGURE), so a slow
// backend costs time, never a queue.
//
// The request timeout can adapt (AttachConfig.MinTimeout): it starts
// short, so that the requests a dying server leaves in flight are resent
// to its successor within about two seconds (the kernel resends them only
// when they time out), doubles at each dropped connection up to
// AttachConfig.Timeout, and comes back down once the server has served
// requests well under it for a while (nbd.ServiceTimes). The kernel keeps
// the timeout a request started with across its resends: requests in
// flight when a backend stalls are resent every MinTimeout until it
// recovers, and only later ones get the raised timeout.
//
// Client is the low-level interface to the family (CONNECT, RECONFIGURE,
// DISCONNECT, STATUS, LINK_DEAD notifications through LinkWatcher) plus
// what sysfs tells about a device; List lists the running devices from
// sysfs alone, whichever interface made them; LoadModule loads nbd.ko
// without a modprobe binary.
//
// Everything here needs CAP_SYS_ADMIN. On kernels older than 5.14 devices
// attach without a cookie and cannot be reattached (Device.Reattachable,
// ErrReattachUnsupported). Kernels older than 4.12 have no nbd netlink
// family at all: Attach then falls back to the driver's ioctls
// (NBD_SET_SOCK, NBD_DO_IT on a thread of its own, NBD_DISCONNECT),
// which give no cookie, no reattach, no release and no replacement of
// dropped connections, and says so in its log (AttachConfig.Ioctl forces
// that path where netlink exists).
//
// The network namespace matters too: before Linux 6.4 the family exists
// only in the kernel's initial network namespace, so a process in another
// one (a Kubernetes pod without hostNetwork) falls back to the ioctls as
// on a kernel before 4.12; and on every kernel LINK_DEAD notifications are
// sent into the initial namespace only, so elsewhere dropped connections
// are never replaced. CheckSupport tells what a process has, and the logs
// name the namespace as the cause where it is (CurrentNetns).
package kernel
