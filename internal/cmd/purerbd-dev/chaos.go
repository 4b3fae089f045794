package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rbd/chaostest"
)

// chaosOptions are chaos's options.
type chaosOptions struct {
	duration, opTimeout time.Duration
	seed                uint64
	workers             int
	imageSize           string
	paths, faults       string
	waitClean           bool
	dir, logFile        string
}

// chaosCommand is `purerbd-dev chaos`: a long chaos run (package
// rbd/chaostest).
func chaosCommand() *cli.Command {
	o := chaosOptions{duration: 10 * time.Minute, workers: 6, imageSize: "128M", paths: "rbd,nbd", faults: "all",
		opTimeout: 10 * time.Second}
	c := &cli.Command{
		Name:    "chaos",
		Summary: "boot a cluster, break it under a checked RBD and NBD workload (chaos --duration 10m)",
		Help: `Boots a throwaway cluster on 127.0.0.1 (3 mons, 3 bluestore OSDs, a mgr),
writes checksummed, versioned blocks to RBD images through the rbd library
and through the userspace NBD export while injecting faults, verifies every
block, prints a table and exits non-zero when anything acknowledged was lost
or corrupted. The last line is

  chaos: F faults, O ops, A acked, L lost, C corrupt, max stall S s

Fault kinds: ` + strings.Join(chaostest.AllFaults, " "),
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return runChaos(ctx, o, inv.Stdout, inv.Stderr)
		},
	}
	c.Duration(&o.duration, "--duration D", "how long the workload runs")
	c.Uint64(&o.seed, "--seed N", "seed of the data and the fault schedule (0: from the clock; printed)")
	c.Int(&o.workers, "--workers N", "concurrent workers per path")
	c.String(&o.imageSize, "--image-size SIZE", "size of each image")
	c.String(&o.paths, "--paths PATHS", "where to write: rbd (the library), nbd (the userspace NBD export)")
	c.String(&o.faults, "--faults KINDS", "fault kinds to inject, comma-separated (all, none)")
	c.Duration(&o.opTimeout, "--op-timeout D", "the clients' RADOS operation timeout")
	c.Bool(&o.waitClean, "--wait-clean", "after a fault wait for recovery to finish (PGs active+clean), not only for PGs active")
	c.String(&o.dir, "--dir DIR", "directory for the cluster (default: a temp dir, removed at exit unless the run failed)")
	c.String(&o.logFile, "--log FILE", "write the clients' debug log to this file")
	return c
}

func runChaos(ctx context.Context, o chaosOptions, stdout, stderr io.Writer) error {
	size, err := cli.ParseSize(o.imageSize, 1)
	if err != nil {
		return cli.Usagef(cli.BadValue, "--image-size: %v", err)
	}
	cfg := chaostest.Config{
		Seed: o.seed, Duration: o.duration, Workers: o.workers, ImageSize: size,
		OpTimeout: o.opTimeout, WaitClean: o.waitClean, Out: stdout,
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano()) % 1_000_000
	}
	for _, p := range strings.Split(o.paths, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Paths = append(cfg.Paths, p)
		}
	}
	switch o.faults {
	case "all":
	case "none", "":
		cfg.Faults = []string{}
	default:
		for _, k := range strings.Split(o.faults, ",") {
			k = strings.TrimSpace(k)
			if !slices.Contains(chaostest.AllFaults, k) {
				return cli.Usagef(cli.BadValue, "--faults: unknown kind %q (want %s)", k, strings.Join(chaostest.AllFaults, ", "))
			}
			cfg.Faults = append(cfg.Faults, k)
		}
	}
	if o.logFile != "" {
		f, err := os.Create(o.logFile)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	fmt.Fprintf(stdout, "purerbd chaos: booting a cluster (3 mons, 3 bluestore OSDs, a mgr) ...\n")
	c, err := cephcluster.Start(ctx, cephcluster.Options{
		Mons: 3, OSDs: 3, WithMgr: true, ObjectStore: cephcluster.StoreBluestore, Dir: o.dir, KeepDir: o.dir != "",
		Conf: chaostest.ClusterConf,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Close(); err != nil {
			fmt.Fprintf(stderr, "purerbd chaos: stopping the cluster: %v\n", err)
		}
	}()
	fmt.Fprintf(stdout, "purerbd chaos: cluster up in %v at %s\n", c.Started.Round(time.Millisecond), c.Dir)
	cfg.Cluster = c
	res, err := chaostest.Run(ctx, cfg)
	failed := err != nil || !res.OK() || len(res.Problems) > 0
	if failed {
		// the cluster's logs are evidence
		c.Options.KeepDir = true
		fmt.Fprintf(stderr, "purerbd chaos: cluster kept at %s\n", c.Dir)
	}
	if err != nil {
		return err
	}
	res.WriteTable(stdout)
	if failed {
		return cli.ExitStatus(1)
	}
	return nil
}
