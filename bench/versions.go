package bench

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// Ceph releases accepted by Config.Releases.
const (
	ReleasePacific  = "pacific"  // Ceph 16.2, the host's packages (Debian 12)
	ReleaseReef     = "reef"     // Ceph 18.2 from a Debian trixie root
	ReleaseTentacle = "tentacle" // Ceph 20.2 from a Debian sid root
)

// Cluster kinds accepted by Config.Tunings.
const (
	// Tuned is the bench's usual cluster: memstore's page set, a raised
	// heartbeat grace and cephcluster's short PG logs (see startCluster).
	Tuned = "tuned"
	// Untuned boots with the release's own defaults for every setting the
	// bench or cephcluster tunes for speed (untunedKeys).
	Untuned = "untuned"
)

// Releases lists the Ceph releases the suite can run against.
func Releases() []string { return []string{ReleasePacific, ReleaseReef, ReleaseTentacle} }

// Tunings lists the cluster kinds.
func Tunings() []string { return []string{Tuned, Untuned} }

// cephRelease maps a release name to cephcluster's.
func cephRelease(release string) string {
	switch release {
	case ReleaseReef:
		return cephcluster.ReleaseReef
	case ReleaseTentacle:
		return cephcluster.ReleaseTentacle
	}
	return cephcluster.ReleaseHost
}

// rootExtras are the Debian packages of the peers installed into a
// release's root (on demand, apart from the tests' package list): fio
// with its rbd engine, qemu-nbd and qemu's rbd block driver.
func rootExtras() []string { return []string{"fio", "qemu-utils", "qemu-block-extra"} }

// qemuRBDDriver is where Debian's qemu-block-extra puts qemu's rbd driver.
const qemuRBDDriver = "/usr/lib/x86_64-linux-gnu/qemu/block-rbd.so"

// clusterKind is one cluster the RADOS and RBD sections run on: a
// release and a tuning.
type clusterKind struct{ release, tuning string }

// label names the kind in tables and results.csv: "reef untuned".
func (k clusterKind) label() string { return k.release + " " + k.tuning }

// suffix is appended to section IDs (plot files) when the run has more
// than one kind, so that each kind's plots are its own.
func (k clusterKind) suffix() string { return "-" + k.release + "-" + k.tuning }

// clusterKinds is every release × tuning of the run, releases outermost.
func (c Config) clusterKinds() []clusterKind {
	var ks []clusterKind
	for _, r := range c.Releases {
		for _, t := range c.Tunings {
			ks = append(ks, clusterKind{r, t})
		}
	}
	return ks
}

// checkKinds rejects unknown release and tuning names.
func (c Config) checkKinds() error {
	for _, r := range c.Releases {
		if !slices.Contains(Releases(), r) {
			return fmt.Errorf("bench: unknown Ceph release %q (have %s)", r, strings.Join(Releases(), ", "))
		}
	}
	for _, t := range c.Tunings {
		if !slices.Contains(Tunings(), t) {
			return fmt.Errorf("bench: unknown cluster kind %q (have %s)", t, strings.Join(Tunings(), ", "))
		}
	}
	return nil
}

// untunedKeys are the settings the tuned cluster changes for speed
// (cephcluster's defaults and the bench's own), which the untuned one
// sets back to the release's defaults.
func untunedKeys() []string {
	return []string{
		"memstore_page_set",       // the bench: pages rather than one buffer list per object
		"osd_heartbeat_grace",     // the bench 120, cephcluster 8
		"osd_heartbeat_interval",  // cephcluster 2
		"osd_max_pg_log_entries",  // cephcluster 1000
		"osd_pg_log_dups_tracked", // cephcluster 1000
		"osd_memory_target",       // cephcluster 896 MiB
		"paxos_propose_interval",  // cephcluster 0.1 s
	}
}

// untunedNote says, for the report, what an untuned cluster still has
// that a default Ceph would not, and why.
const untunedNote = "An **untuned** cluster sets back to the release's own defaults (read from its `ceph-conf " +
	"--show-config-value`) every setting the tuned one changes for speed: `memstore_page_set`, " +
	"`osd_heartbeat_grace` and `osd_heartbeat_interval`, `osd_max_pg_log_entries`, `osd_pg_log_dups_tracked`, " +
	"`osd_memory_target` and `paxos_propose_interval`. What remains is what the harness needs to run at all on " +
	"one machine: one mon and one OSD on 127.0.0.1, pool size 1 with 32 PGs and the autoscaler off, CRUSH " +
	"choosing across OSDs rather than hosts, `memstore_device_bytes` raised (only the size memstore reports, so " +
	"that the bench data never looks full), no down-out interval, log and data paths in the cluster's " +
	"directory, and the daemons run with tcmalloc (preloaded for Pacific from Debian, which builds them with " +
	"glibc's malloc; linked by the roots' packages) as Ceph's own packages run them."

// releaseDefaults reads the release's defaults for keys with its own
// ceph-conf (in root when set) and no configuration file.
func releaseDefaults(ctx context.Context, root string, keys []string) (map[string]string, error) {
	d := map[string]string{}
	for _, k := range keys {
		args := []string{"ceph-conf", "-c", "/dev/null", "--show-config-value", k}
		if root != "" {
			args = append([]string{"chroot", root}, args...)
		}
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).Output()
		if err != nil {
			return nil, fmt.Errorf("bench: the default of %s (%s): %w", k, strings.Join(args, " "), err)
		}
		d[k] = strings.TrimSpace(string(out))
	}
	return d, nil
}

// title names the kind in section titles: "Ceph reef, untuned cluster".
func (k clusterKind) title() string { return "Ceph " + k.release + ", " + k.tuning + " cluster" }

// mark gives sec, measured on a cluster of kind k in a report of several
// kinds, its kind-suffixed ID (its plots' file names), title and short
// name, keeping the plain ID as Base for the headline's rows.
func (k clusterKind) mark(sec *Section) {
	sec.Base = sec.ID
	sec.ID += k.suffix()
	sec.Title += " — " + k.title()
	sec.Short += " (" + k.label() + ")"
}

// label marks sec as run on c's cluster: Cluster names its kind, and in
// a run of several kinds its ID (the plots' file names), title and short
// name carry the kind too.
func (s *suite) label(c *cluster, sec *Section) {
	sec.Cluster = c.kind.label()
	if len(s.cfg.clusterKinds()) > 1 {
		c.kind.mark(sec)
	}
}
