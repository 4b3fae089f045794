// Package chaostest is a data-integrity workload and fault injector for
// purerbd, in the spirit of Ceph's rbd_fsx.
//
// A run writes checksummed, versioned blocks to RBD images through two
// paths at once — the rbd library directly, and an RBD image exported by
// the userspace NBD server (package nbd) to an NBD client (package
// nbd/nbdtest) over a Unix socket — while faults are injected into a real
// Ceph cluster (package rados/radostest/cephcluster): OSDs killed and
// restarted, marked out and in, paused past the operation timeout, the
// client's connections to an OSD or a monitor cut, monitors killed (the one
// the client uses among them), the pool's pg_num changed, the NBD server
// killed and restarted under its client, and the NBD client made a slow
// consumer of its replies.
//
// Every block records its image, its own offset, a version and a payload
// derived from the run's seed, with a crc32c over all of it (block.go).
// The model (model.go) knows which versions each block may hold given the
// writes acknowledged so far: exactly the last acknowledged one, plus any
// later write that failed or is in flight, since a write that returned an
// error may or may not have landed. Reads check every block against it as
// the workload runs, and every block of every image is checked at the end,
// through the path that wrote it and through librbd (`rbd export`).
// A block holding an older version than one acknowledged is lost; a block
// that does not decode, or holds data that was never written there, is
// corrupt. Both must stay at zero.
//
// The fault schedule and all data derive from one seed, so a run can be
// repeated (timings on a loaded machine still vary). Run prints a table
// whose last line is
//
//	chaos: F faults, O ops, A acked, L lost, C corrupt, max stall S s
//
// `purerbd-dev chaos` (internal/cmd/purerbd-dev) and `make chaos` drive a long run; TestChaos in this
// package is the short one `make test` runs.
package chaostest
