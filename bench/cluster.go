package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// cluster is a throwaway Ceph cluster the RADOS and RBD sections share.
type cluster struct {
	*cephcluster.Cluster
	store string // object store of its OSD
	kind  clusterKind
	boot  time.Duration
	// peerErr says why the release's root lacks its peers (fio,
	// qemu-nbd); "" when they were installed or are the host's.
	peerErr string
}

// startCluster boots one mon and one OSD with the given object store and
// an "rbd" pool, of the kind's release: Pacific from the host's
// packages, Reef and Tentacle from their roots (cephcluster), into which
// the peers of the release (fio, qemu-nbd) are installed on demand.
// memstore's device size is only what it reports to the monitors; it is
// raised so that the bench data never looks "full".
//
// A tuned cluster also raises the heartbeat grace: a PG's read lease is
// 0.8 of it, and an OSD starved of CPU for longer than its lease (seen on
// this busy machine with bluestore) marks its PGs laggy, which a
// single-OSD cluster never clears: every op then waits "for readable"
// forever. memstore keeps object data in pages (memstore_page_set)
// rather than as one buffer list per object: a buffer list gains a piece
// with every small write, and each write walks all of the object's
// pieces, so the OSD's cost per 4 KiB write grew with everything written
// before it (2-3x within one section) and the figures depended on which
// client had written first. An untuned cluster has the release's
// defaults for these and for what cephcluster tunes (untunedKeys).
func (s *suite) startCluster(ctx context.Context, store string, kind clusterKind) (*cluster, error) {
	release := cephRelease(kind.release)
	if release == cephcluster.ReleaseHost {
		if t := haveTools("ceph-mon", "ceph-osd", "ceph", "rados", "rbd"); t != "" {
			return nil, fmt.Errorf("%s is not installed (make deps)", t)
		}
	}
	root, err := cephcluster.EnsureRoot(ctx, release)
	if err != nil {
		return nil, err
	}
	var peerErr string
	if root != "" {
		if _, err := cephcluster.EnsureRootExtras(ctx, release, rootExtras()...); err != nil {
			peerErr = err.Error()
			s.log.Warn("bench: the release's peers are missing from its root", "release", kind.release, "err", err)
		}
	}
	conf := map[string]string{"memstore_device_bytes": "17179869184"}
	if kind.tuning == Untuned {
		d, err := releaseDefaults(ctx, root, untunedKeys())
		if err != nil {
			return nil, err
		}
		maps.Copy(conf, d)
	} else {
		conf["osd_heartbeat_grace"], conf["memstore_page_set"] = "120", "true"
	}
	t0 := time.Now()
	c, err := cephcluster.Start(ctx, cephcluster.Options{
		OSDs: 1, ObjectStore: store, Pool: "rbd", PGNum: 32, Conf: conf, Release: release,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %s cluster (%s): %w", kind.label(), store, err)
	}
	s.log.Info("bench: cluster up", "store", store, "kind", kind.label(), "dir", c.Dir, "boot", time.Since(t0).Round(time.Millisecond))
	return &cluster{Cluster: c, store: store, kind: kind, boot: time.Since(t0), peerErr: peerErr}, nil
}

// tool runs one of Ceph's CLIs (rbd, rados) of the cluster's release
// against the cluster and returns its output and usage.
func (s *suite) tool(ctx context.Context, c *cluster, name string, args ...string) (childResult, error) {
	return runCmd(c.ToolCommand(ctx, name, args...), s.work, nil)
}

// command is a launcher of the cluster's release's programs.
func (c *cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return c.Command(ctx, name, args...)
}

// peerDir returns a directory for the files a peer of the cluster's
// release reads or writes (fio's output, a ceph.conf copy, qemu-nbd's
// socket): in the work directory for the host's tools, in the cluster's
// directory for a root's, which sees only that one at the same path.
func (s *suite) peerDir(c *cluster, name string) (string, error) {
	dir := filepath.Join(s.work, name)
	if c.Root() != "" {
		dir = filepath.Join(c.Dir, "bench", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return dir, nil
}

// havePeer reports why the cluster's release lacks program ("" when it
// has it): the host's PATH for Pacific, the root for the others.
func (c *cluster) havePeer(program string) string {
	if c.Root() == "" {
		if haveTools(program) != "" {
			return program + " is not installed (make deps)"
		}
		return ""
	}
	for _, d := range []string{"/usr/bin", "/usr/sbin"} {
		if fileExists(filepath.Join(c.Root(), d, program)) {
			return ""
		}
	}
	why := program + " is not in the " + c.kind.release + " root"
	if c.peerErr != "" {
		why += " (installing it failed: " + lastLines([]byte(c.peerErr), 2) + ")"
	}
	return why
}

// qemuRBD reports why the release's qemu-nbd cannot open RBD images (""
// when it can).
func (c *cluster) qemuRBD() string {
	if why := c.havePeer("qemu-nbd"); why != "" {
		return why
	}
	if !fileExists(filepath.Join(c.Root(), qemuRBDDriver)) {
		return "qemu-nbd of " + c.kind.release + " has no rbd driver (qemu-block-extra)"
	}
	return ""
}

// peerVersions are the versions of the cluster's release's peer tools.
func (c *cluster) peerVersions(ctx context.Context) []Tool {
	var ts []Tool
	for _, t := range []string{"rbd", "fio", "qemu-nbd"} {
		v := "not available"
		if c.havePeer(t) == "" {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			out, err := c.Command(ctx, t, "--version").CombinedOutput()
			cancel()
			v, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
			if err != nil && v == "" {
				v = "unknown (" + err.Error() + ")"
			}
		}
		ts = append(ts, Tool{Name: t, Version: v})
	}
	return ts
}

// purerbd runs `purerbd VERB -c CONF ARGS...` against the cluster.
func (s *suite) purerbd(ctx context.Context, c *cluster, verb string, args ...string) (childResult, error) {
	return runChild(ctx, s.work, nil, s.bin("purerbd"), append([]string{verb, "-c", c.Conf}, args...)...)
}

// clusterVersion asks the running daemons for their version.
func (s *suite) clusterVersion(ctx context.Context, c *cluster) string {
	out, err := c.Ceph(ctx, "version")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// makeImage creates a 'size' image with the given features (librbd's
// defaults when empty) and fills it with 4 MiB writes so that reads hit
// allocated objects.
func (s *suite) makeImage(ctx context.Context, c *cluster, name string, size int64, features string) error {
	args := []string{"create", "--size", fmt.Sprintf("%dM", size>>20)}
	if features != "" {
		args = append(args, "--image-feature", features)
	}
	if _, err := s.tool(ctx, c, "rbd", append(args, "rbd/"+name)...); err != nil {
		return err
	}
	_, err := s.tool(ctx, c, "rbd", "bench", "--io-type", "write", "--io-size", "4M", "--io-threads", "8",
		"--io-total", fmt.Sprint(size), "--io-pattern", "seq", "rbd/"+name)
	return err
}

// closeCluster stops the cluster, keeping its logs in the work directory
// when keep is set.
func (s *suite) closeCluster(c *cluster) {
	if c == nil {
		return
	}
	logs := filepath.Join(c.Dir, "log")
	if ents, err := os.ReadDir(logs); err == nil && len(ents) > 0 {
		dst := filepath.Join(s.work, "ceph-logs-"+c.store+c.kind.suffix())
		_ = os.MkdirAll(dst, 0o755)
		for _, e := range ents {
			if b, err := os.ReadFile(filepath.Join(logs, e.Name())); err == nil && len(b) < 64<<20 {
				_ = os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
			}
		}
	}
	if err := c.Close(); err != nil {
		s.log.Warn("bench: cluster close", "err", err)
	}
}

// logOSDSpace logs what the cluster's OSD reports as used and as its size
// (osd.0's perf counters), after the named section: a memstore OSD holds
// everything in memory and refuses writes once it reports itself full,
// so a run that leaves data behind shows here first.
func (s *suite) logOSDSpace(ctx context.Context, c *cluster, after string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := c.Ceph(ctx, "daemon", "osd.0", "perf", "dump")
	if err != nil {
		s.log.Warn("bench: OSD space", "after", after, "err", err)
		return
	}
	var d struct {
		OSD struct {
			Used  uint64 `json:"stat_bytes_used"`
			Total uint64 `json:"stat_bytes"`
		} `json:"osd"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		s.log.Warn("bench: OSD space", "after", after, "err", err)
		return
	}
	if d.OSD.Used > d.OSD.Total {
		// The counter is unsigned in Ceph: below zero it reads as ~2^64.
		s.log.Warn("bench: the OSD's used-bytes counter went below zero (a memstore accounting fault, findings row 16): it reports itself full and refuses writes from now on",
			"after", after, "used", d.OSD.Used, "size_mib", d.OSD.Total>>20)
		return
	}
	s.log.Info("bench: OSD space", "after", after, "used_mib", d.OSD.Used>>20, "size_mib", d.OSD.Total>>20)
}
