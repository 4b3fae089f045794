// Package ublk serves an nbd.Backend to the Linux kernel as a ublk block
// device (/dev/ublkbN), the userspace block driver that Linux 6.0 and
// later drive through io_uring (ublk_drv): requests reach the server as
// descriptors in memory it shares with the kernel, and their data is
// copied between the kernel's pages and per-request buffers, with no
// socket and no protocol in between, unlike the NBD path of package
// nbd/kernel.
//
// A Control (from /dev/ublk-control) adds, parameterises, starts, stops
// and deletes devices; Serve does all of that for a Backend and returns a
// Device whose queues run until the device is stopped. Devices are
// added with user recovery: when the serving process dies, the kernel
// keeps the device and holds its I/O, and Recover, from a new process,
// takes the same device over (START_USER_RECOVERY, new queues,
// END_USER_RECOVERY); requests the dead process had taken are issued
// again (UBLK_F_USER_RECOVERY_REISSUE where the kernel has it), so the
// application sees a pause, not an error.
//
// Each queue is one OS thread that owns an io_uring (package
// internal/uring) and is the only one to talk to the kernel about its
// requests, as ublk requires; the backend runs in goroutines of its own.
// Where the kernel offers user copy (UBLK_F_USER_COPY, Linux 6.5), a
// request's goroutine copies its data through the character device
// (pread for a write's data, pwrite for a read's) with a pooled buffer;
// elsewhere, or with Config.NoUserCopy, the kernel copies it into and out
// of a buffer per tag that the queue keeps for the device's life.
//
// Zero copy (UBLK_F_SUPPORT_ZERO_COPY, Linux 6.15, and its automatic
// form UBLK_F_AUTO_BUF_REG, 6.16) is not used. It lends a request's pages
// to the server's io_uring as a fixed buffer that only io_uring
// operations read or write, never the server's own code. The backends
// served here must see the bytes: the Ceph messenger checksums each
// message's data (crc mode) or encrypts it (secure mode), and an
// encrypted image encrypts it first. So a request's data is copied once
// each way, as through an NBD socket, and user copy is that one copy.
//
// Where the kernel also offers batch I/O (UBLK_F_BATCH_IO, Linux 7.0), a
// device with user copy uses it unless Config.NoBatchIO says otherwise:
// one multishot command fetches a queue's requests in batches of tags
// into provided buffers, a goroutine on no particular thread hands them
// out, and the requests' goroutines commit their results in batches from
// whatever thread they run on (batch.go). The queue's thread then only
// issues the fetch and runs the kernel's dispatch work, so a request no
// longer waits for the Go runtime to hand it to that thread and back.
package ublk
