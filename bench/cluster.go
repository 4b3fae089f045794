package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

// cluster is a throwaway Ceph cluster the RADOS and RBD sections share.
type cluster struct {
	*cephcluster.Cluster
	store string // object store of its OSD
	boot  time.Duration
}

// startCluster boots one mon and one OSD with the given object store and
// an "rbd" pool. memstore's device size is only what it reports to the
// monitors; it is raised so that the bench data never looks "full". The
// heartbeat grace is raised too: a PG's read lease is 0.8 of it, and an
// OSD starved of CPU for longer than its lease (seen on this busy machine
// with bluestore) marks its PGs laggy, which a single-OSD cluster never
// clears: every op then waits "for readable" forever. memstore keeps
// object data in pages (memstore_page_set) rather than as one buffer
// list per object: a buffer list gains a piece with every small write,
// and each write walks all of the object's pieces, so the OSD's cost per
// 4 KiB write grew with everything written before it (2-3x within one
// section) and the figures depended on which client had written first.
func (s *suite) startCluster(ctx context.Context, store string) (*cluster, error) {
	if t := haveTools("ceph-mon", "ceph-osd", "ceph", "rados", "rbd"); t != "" {
		return nil, fmt.Errorf("%s is not installed (make deps)", t)
	}
	t0 := time.Now()
	c, err := cephcluster.Start(ctx, cephcluster.Options{
		OSDs: 1, ObjectStore: store, Pool: "rbd", PGNum: 32,
		Conf: map[string]string{"memstore_device_bytes": "17179869184", "osd_heartbeat_grace": "120", "memstore_page_set": "true"},
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("bench: cluster up", "store", store, "dir", c.Dir, "boot", time.Since(t0).Round(time.Millisecond))
	return &cluster{Cluster: c, store: store, boot: time.Since(t0)}, nil
}

// tool runs one of Ceph's CLIs (rbd, rados) against the cluster and
// returns its output and usage.
func (s *suite) tool(ctx context.Context, c *cluster, name string, args ...string) (childResult, error) {
	return runChild(ctx, s.work, nil, name, append([]string{"-c", c.Conf}, args...)...)
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
		dst := filepath.Join(s.work, "ceph-logs-"+c.store)
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
