package chaostest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/purerbd/purerbd/nbd"
	"github.com/purerbd/purerbd/nbd/rbdnbd"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rbd"
)

// The ways a run reaches its images.
const (
	PathRBD = "rbd" // the rbd library, in process
	PathNBD = "nbd" // the userspace NBD server over a Unix socket, through an NBD client
)

// ClusterConf is the ceph.conf a chaos cluster needs beyond radostest's:
// all its OSDs run on one host, and by default failure reports from one
// host count once, so a stopped (SIGSTOP) OSD would never be marked down
// by its peers as it would be in a real cluster.
var ClusterConf = map[string]string{"mon_osd_reporter_subtree_level": "osd"}

// Config shapes a run. Only Cluster is required.
type Config struct {
	// Cluster is the cluster to write to and to break: three mons, three
	// OSDs on bluestore (memstore forgets everything on SIGKILL) and a
	// mgr (pg_num changes need one).
	Cluster *cephcluster.Cluster
	// Seed derives the data and the fault schedule.
	Seed uint64
	// Duration is how long the workload runs; faults stop a little
	// earlier so that the last ones heal while it still runs.
	Duration time.Duration
	// Workers is the number of concurrent workers per path (default 6).
	Workers int
	// ImageSize is the size of each image (default 128 MiB).
	ImageSize int64
	// Paths are PathRBD and/or PathNBD (default both).
	Paths []string
	// Faults are the kinds to inject (nil: AllFaults; empty: none), in
	// rounds of every kind once, each round shuffled, except the first
	// with FaultsInOrder.
	Faults        []string
	FaultsInOrder bool
	// MaxHold caps how long a fault lasts before it is healed (0: no
	// cap; an OSD is still paused for longer than OpTimeout).
	MaxHold time.Duration
	// FaultGap is the range of the quiet time after each fault healed
	// (default 2 to 8 s).
	FaultGap [2]time.Duration
	// HealthWait bounds the wait for the cluster to be healthy again
	// after a fault (default 90 s): mons in quorum, OSDs up and PGs
	// active; with WaitClean, PGs active+clean (recovery done).
	HealthWait time.Duration
	WaitClean  bool
	// OpTimeout is the clients' RADOS operation timeout (default 10 s).
	OpTimeout time.Duration
	// HangLimit cancels an operation that runs longer and counts it as
	// hung (default 3 min).
	HangLimit time.Duration
	// Out receives progress lines (nil: none).
	Out io.Writer
	// Logger receives the clients' logs (nil: none).
	Logger *slog.Logger
	// NoExportCheck skips the final check of the images through librbd
	// (`rbd export`).
	NoExportCheck bool
}

// PathResult is what happened on one path.
type PathResult struct {
	Path, Image           string
	Issued, Acked, Failed int64
	Hung                  int64 // failed because they ran past the hang limit
	Verified              int64 // blocks read back and checked
	Lost, Corrupt         int   // distinct blocks
	MaxStall              time.Duration
	Slowest               string         // the operation that stalled longest
	Reconnects, Retries   int64          // NBD connections made, requests retried on a new one
	Errors                map[string]int // failed operations by error
}

// Result is the outcome of a run.
type Result struct {
	Seed        uint64
	Duration    time.Duration // wall time of the whole run
	Faults      map[string]int
	FaultErrors []string // faults that could not be injected or healed as planned
	Paths       []PathResult
	Findings    []string // lost and corrupt blocks (the first ones)
	Problems    []string // the run itself went wrong (cluster did not heal, final read failed)
}

// Run runs the workload on the paths cfg names while injecting faults,
// verifies every image at the end and returns the tally. An error means
// the run could not be set up; data loss and corruption are in Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	c := cfg.Cluster
	start := time.Now()
	res := &Result{Seed: cfg.Seed, Faults: map[string]int{}}
	var sayMu sync.Mutex
	say := func(format string, args ...any) {
		sayMu.Lock()
		defer sayMu.Unlock()
		fmt.Fprintf(cfg.Out, "[%7.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	say("chaos: seed %d, %v, paths %v, %d workers each, images of %d MiB, op timeout %v, faults %v",
		cfg.Seed, cfg.Duration, cfg.Paths, cfg.Workers, cfg.ImageSize>>20, cfg.OpTimeout, cfg.Faults)

	// runCtx ends every background goroutine of the run
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()

	var (
		paths   []*path
		conns   []*rados.Conn
		images  []*rbd.Image
		export  *nbdExport
		nbdc    *nbdTarget
		sockDir string
	)
	defer func() {
		if nbdc != nil {
			nbdc.close()
		}
		if export != nil {
			export.kill()
		}
		for _, img := range images {
			img.Close()
		}
		for _, conn := range conns {
			conn.Close()
		}
		if sockDir != "" {
			os.RemoveAll(sockDir)
		}
	}()
	admin, err := rados.Connect(ctx, rados.Config{MonHost: c.MonHost(), Key: c.AdminKey, Logger: cfg.Logger.With("conn", "admin")})
	if err != nil {
		return nil, fmt.Errorf("chaos: connecting: %w", err)
	}
	defer admin.Close()
	for _, name := range cfg.Paths {
		conn, err := rados.Connect(ctx, rados.Config{
			MonHost: c.MonHost(), Key: c.AdminKey, OpTimeout: cfg.OpTimeout, Logger: cfg.Logger.With("path", name),
		})
		if err != nil {
			return nil, fmt.Errorf("chaos: connecting (%s path): %w", name, err)
		}
		conns = append(conns, conn)
		ioc, err := conn.IOContext(ctx, c.Pool, "")
		if err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		image := fmt.Sprintf("chaos-%d-%s", cfg.Seed, name)
		opts := rbd.CreateOptions{Order: 20}
		if name == PathNBD {
			// fancy striping on one of the two images
			opts.StripeUnit, opts.StripeCount = 64<<10, 4
		}
		if err := rbd.Remove(ctx, ioc, image, rbd.RemoveOptions{Force: true}); err != nil && !errors.Is(err, rbd.ErrNotFound) {
			return nil, fmt.Errorf("chaos: removing an old %s: %w", image, err)
		}
		if err := rbd.Create(ctx, ioc, image, cfg.ImageSize, opts); err != nil {
			return nil, fmt.Errorf("chaos: creating %s: %w", image, err)
		}
		img, err := rbd.Open(ctx, ioc, image, rbd.OpenOptions{AcquireLock: true, Logger: cfg.Logger.With("image", image)})
		if err != nil {
			return nil, fmt.Errorf("chaos: opening %s: %w", image, err)
		}
		images = append(images, img)
		p := &path{name: name, image: image, model: newModel(image, cfg.Seed, cfg.ImageSize),
			log: cfg.Logger, hang: cfg.HangLimit}
		switch name {
		case PathRBD:
			p.target = &rbdTarget{img: img}
		case PathNBD:
			backend := rbdnbd.New(img)
			if sockDir, err = os.MkdirTemp("", "purerbd-chaos-"); err != nil {
				return nil, fmt.Errorf("chaos: %w", err)
			}
			export = &nbdExport{path: filepath.Join(sockDir, "nbd.sock"), log: cfg.Logger.With("nbd", "server"),
				export: &nbd.Export{Name: exportName, Backend: backend, MinBlockSize: 512, PreferredBlockSize: BlockSize}}
			if err := export.start(runCtx); err != nil {
				return nil, fmt.Errorf("chaos: %w", err)
			}
			nbdc = newNBDTarget(export.path, 2)
			p.target = nbdc
		default:
			return nil, fmt.Errorf("chaos: unknown path %q (want %s or %s)", name, PathRBD, PathNBD)
		}
		paths = append(paths, p)
	}

	// the workload
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for pi, p := range paths {
		for w := range cfg.Workers {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(pi)<<32|uint64(w)))
			wg.Go(func() { p.worker(runCtx, rng, stop) })
		}
		wg.Go(func() { p.scrubber(runCtx, stop) })
	}
	say("workload started")

	// status lines while it runs
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-runCtx.Done():
				return
			case <-t.C:
				for _, p := range paths {
					say("  %s: %d ops, %d acked, %d failed, %d blocks verified, slowest %.1fs",
						p.name, p.issued.Load(), p.acked.Load(), p.failed.Load(), p.verified.Load(),
						time.Duration(p.maxLatency.Load()).Seconds())
				}
			}
		}
	}()

	// the faults
	in := &injector{c: c, admin: admin, conns: conns, export: export, nbdc: nbdc, say: say,
		paused: map[string]bool{}, outs: map[int]bool{}, pgNum: c.Options.PGNum}
	if in.pgNum == 0 {
		in.pgNum = 16
	}
	faultsEnd := start.Add(cfg.Duration - min(cfg.Duration/8, 30*time.Second))
	workEnd := start.Add(cfg.Duration)
	if len(cfg.Faults) > 0 {
		sched := newSchedule(cfg.Seed, cfg.Faults, c.Options.OSDs, len(c.MonNames), cfg.OpTimeout, cfg.FaultGap)
		if cfg.FaultsInOrder {
			sched.round = slices.Clone(cfg.Faults)
		}
		for ctx.Err() == nil {
			f := sched.next()
			if cfg.MaxHold > 0 && f.kind != FaultOSDPause {
				f.hold = min(f.hold, cfg.MaxHold)
			}
			if time.Now().Add(f.hold).After(faultsEnd) {
				break
			}
			err := in.inject(runCtx, f)
			res.Faults[f.kind]++
			if err != nil {
				res.FaultErrors = append(res.FaultErrors, fmt.Sprintf("%s: %v", f.kind, err))
				say("  fault %s: %v", f.kind, err)
			}
			if err := in.waitHealthy(runCtx, cfg.HealthWait, cfg.WaitClean); err != nil {
				say("  cluster not healthy %v after %s: %v", cfg.HealthWait, f.kind, err)
				res.Problems = append(res.Problems, fmt.Sprintf("not healthy %v after %s: %v", cfg.HealthWait, f.kind, err))
			}
			if time.Now().Add(f.gap).After(faultsEnd) {
				break
			}
			sleepCtx(runCtx, f.gap)
		}
	}
	sleepCtx(runCtx, time.Until(workEnd))
	close(stop)
	say("stopping the workload")
	wg.Wait()
	<-statusDone

	// heal, then check everything
	in.healAll(ctx)
	if err := in.waitHealthy(ctx, 3*time.Minute, false); err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("cluster not healthy before the final check: %v", err))
	}
	for _, p := range paths {
		say("final check of %s through %s", p.image, p.name)
		if err := p.verifyAll(ctx); err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
	}
	if nbdc != nil {
		nbdc.close()
		nbdc = nil
	}
	if export != nil {
		export.kill()
		export = nil
	}
	for _, img := range images {
		if err := img.CloseContext(ctx); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("closing %s: %v", img.Name(), err))
		}
	}
	images = nil
	if !cfg.NoExportCheck {
		for _, p := range paths {
			say("final check of %s through librbd (rbd export)", p.image)
			if err := checkExport(ctx, c, p); err != nil {
				res.Problems = append(res.Problems, err.Error())
			}
		}
	}

	for _, p := range paths {
		lost, corrupt := p.model.findings()
		pr := PathResult{
			Path: p.name, Image: p.image,
			Issued: p.issued.Load(), Acked: p.acked.Load(), Failed: p.failed.Load(), Hung: p.hung.Load(),
			Verified: p.verified.Load(), Lost: len(lost), Corrupt: len(corrupt),
			MaxStall: time.Duration(p.maxLatency.Load()), Slowest: p.worst, Errors: p.errors,
		}
		if t, ok := p.target.(*nbdTarget); ok {
			pr.Reconnects, pr.Retries = t.reconnects.Load(), t.retries.Load()
		}
		res.Paths = append(res.Paths, pr)
		res.Findings = append(res.Findings, firstN(lost, 10)...)
		res.Findings = append(res.Findings, firstN(corrupt, 10)...)
	}
	res.Duration = time.Since(start)
	return res, nil
}

func (cfg *Config) defaults() {
	if cfg.Duration <= 0 {
		cfg.Duration = time.Minute
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 6
	}
	if cfg.ImageSize <= 0 {
		cfg.ImageSize = 128 << 20
	}
	cfg.ImageSize -= cfg.ImageSize % BlockSize
	if len(cfg.Paths) == 0 {
		cfg.Paths = []string{PathRBD, PathNBD}
	}
	if cfg.Faults == nil {
		cfg.Faults = AllFaults
	}
	if !slices.Contains(cfg.Paths, PathNBD) {
		cfg.Faults = slices.DeleteFunc(slices.Clone(cfg.Faults), func(k string) bool {
			return k == FaultNBDKill || k == FaultSlowConsumer
		})
	}
	if cfg.FaultGap == [2]time.Duration{} {
		cfg.FaultGap = [2]time.Duration{2 * time.Second, 8 * time.Second}
	}
	if cfg.HealthWait <= 0 {
		cfg.HealthWait = 90 * time.Second
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 10 * time.Second
	}
	if cfg.HangLimit <= 0 {
		cfg.HangLimit = 3 * time.Minute
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
}

// checkExport reads an image with librbd (`rbd export`) and checks every
// block: a third reader, independent of purerbd.
func checkExport(ctx context.Context, c *cephcluster.Cluster, p *path) error {
	dir, err := os.MkdirTemp("", "purerbd-chaos-export-")
	if err != nil {
		return fmt.Errorf("rbd export: %w", err)
	}
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, p.image)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := c.Rbd(ctx, "export", c.Pool+"/"+p.image, name, "--no-progress", "--export-format", "1"); err != nil {
		return fmt.Errorf("rbd export of %s: %w", p.image, err)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("rbd export: %w", err)
	}
	if int64(len(data)) != int64(p.model.numBlocks())*BlockSize {
		return fmt.Errorf("rbd export of %s: %d bytes, want %d", p.image, len(data), int64(p.model.numBlocks())*BlockSize)
	}
	p.model.check(0, data, "librbd export")
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... and %d more", len(s)-n))
	}
	return s
}
