// Package guestbench is the part of the benchmark suite that runs inside
// the test VM (nbd/kernel/vmtest), as `purerbd-bench guest`: it measures
// the kernel path — /dev/nbdN served by the shipped `purerbd nbd map`
// (memory disk, and an RBD image when the guest has a cluster to reach),
// beside nbdkit's memory plugin and the kernel's own rbd driver on the
// same VM — with O_DIRECT I/O from goroutines, and the node plugin
// (`purerbd-csi --node`) staging RBD volumes: its stage and unstage times
// and its resident memory with 1 and 10 volumes attached.
//
// Everything the host needs is printed on the console, one record a line:
// "SAMPLE <json>" per measured run, "NODE <json>" for the node plugin,
// "NOTE <text>" for what could not be measured, and a last
// "RESULT ok" or "RESULT fail <reason>".
//
// The guest is software-emulated (qemu TCG): the figures guard against
// regressions and compare contenders within one boot; they say little
// about real hardware.
package guestbench
