// Package bench is purerbd's side-by-side benchmark suite. It runs
// purerbd's components and their established peers (nbdkit and qemu-nbd
// for NBD, librados' `rados bench` and fio's rados engine, librbd's
// `rbd bench` and fio's rbd engine) against the same targets on the same
// machine in the same run, interleaving the contenders (A B, B A ...)
// over several repetitions, and writes a Markdown report with medians,
// min–max spread, the ratio purerbd/peer, client CPU per GiB and per
// million operations, peak RSS and latency percentiles, plus SVG plots
// drawn by bench/internal/svgplot. The RADOS and RBD sections also give
// the OSD's CPU per client operation (read from /proc around every run,
// osdcpu.go), so that a client which saves its own CPU by spending the
// OSD's shows it.
//
// The report opens with a headline table (comparison, purerbd, peer,
// ratio, target) computed from the run's samples (headline.go).
//
// The kernel-vm section boots Debian's kernel under qemu (TCG, through
// nbd/kernel/vmtest) with `purerbd-bench guest` (package
// bench/internal/guestbench): /dev/nbdN served by purerbd against nbdkit
// and against rbd.ko on a cluster in a network namespace, and the node
// plugin staging ten volumes (stage/unstage times, RSS with 1 and 10
// attached). It is labelled software-emulated and kept out of the
// host's summary. Run it alone with `-only kernel-vm`.
//
// The RADOS and RBD sections run on every Ceph release of Config.Releases
// (`-ceph pacific,reef,tentacle`, `make bench CEPH=...`; Pacific from the
// host, Reef and Tentacle from cephcluster's roots, each with that
// release's own rbd, rados, fio and qemu-nbd, installed into the root on
// first use) and cluster kind of Config.Tunings (`-cluster
// tuned,untuned`, `make bench CLUSTER=...`; versions.go says what an
// untuned cluster keeps); with more than one, the headline has a column
// per release and kind. purerbd's side is always the host's static
// binaries. A section whose peer a release lacks says so and is skipped.
//
// Every run also leaves its whole Report in report.gob beside report.md;
// `purerbd-bench render DIR...` draws report.md again from it, or from
// several runs merged (MergeReports): a matrix of releases and kinds too
// long for one sitting runs as a run per release, and a section measured
// again replaces the older figures of the same kind.
//
// Absolute numbers depend on the machine and its load; the ratios are
// the result. Every section records the load average around it.
//
// The suite builds every binary it runs itself (CGO_ENABLED=0, the
// release flags of `make build`) so that what is measured is what ships.
// bench/cmd/purerbd-bench is its command: `make bench` runs it, and its
// `load` and `serve-rbd` sub-commands are the purerbd-side workers the
// suite spawns as child processes (so their CPU and RSS are measured by
// getrusage like any peer's).
package bench
