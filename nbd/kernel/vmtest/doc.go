// Package vmtest boots a Linux kernel under qemu for a test, with an
// initramfs built at test time, runs one program in it and hands back the
// serial console: the way to test code that needs a real kernel driver
// (nbd.ko) on machines where the test itself runs in a container.
//
// FindHost locates the pieces on a Debian host (the kernel image and its
// modules from linux-image-amd64, qemu-system-x86_64 from
// qemu-system-x86, a static busybox from busybox-static) and fails the
// test naming the packages when one is missing. Run writes an initramfs
// holding busybox, the requested modules with their dependencies and a
// modules.dep for them, host programs with their shared libraries, and
// the caller's files (typically a static Go program made with BuildGo),
// boots it with software emulation (no KVM; no network unless
// Config.Network puts the guest on a tap in a test's network namespace) and returns when
// the program has ended and the guest powered off.
//
// In the guest, /init mounts devtmpfs, proc, sysfs and tmpfs on /tmp and
// /run, runs the command as its child and prints its exit status; the
// command's own output reaches the console unchanged.
//
// Under TCG a guest kernel now and then dies or stops before init. A boot
// that panics before init, or shows no init within its limit
// (Config.BootTimeout), is booted again, up to three times in all; a
// stopped boot first has its vCPUs' registers read, paused, through
// qemu's monitor and written to the console (stall.go). A guest kernel
// that reports a CPU stuck for a minute, or its tenth Oops, is stopped
// the same way at once (lockup.go): booted again when the lockup came before init or before
// the caller's Config.Ready, the run's error after.
package vmtest
