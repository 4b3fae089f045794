package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
	"github.com/purerbd/purerbd/rbd/chaostest"
)

const chaosUsage = `usage: purerbd chaos [flags]

Boots a throwaway cluster on 127.0.0.1 (3 mons, 3 bluestore OSDs, a mgr),
writes checksummed, versioned blocks to RBD images through the rbd library
and through the userspace NBD export while injecting faults, verifies every
block, prints a table and exits non-zero when anything acknowledged was lost
or corrupted. The last line is

  chaos: F faults, O ops, A acked, L lost, C corrupt, max stall S s

Fault kinds: ` + "osd-kill osd-out osd-pause osd-cut mon-kill mon-cut pg-num nbd-kill slow-consumer" + `

flags:`

// runChaos is `purerbd chaos`: a long chaos run (package rbd/chaostest).
func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, chaosUsage); fs.PrintDefaults() }
	duration := fs.Duration("duration", 10*time.Minute, "how long the workload runs")
	seed := fs.Uint64("seed", 0, "seed of the data and the fault schedule (0: from the clock; printed)")
	workers := fs.Int("workers", 6, "concurrent workers per path")
	imageSize := fs.String("image-size", "128M", "size of each image")
	paths := fs.String("paths", "rbd,nbd", "where to write: rbd (the library), nbd (the userspace NBD export)")
	faults := fs.String("faults", "all", "fault kinds to inject, comma-separated (all, none)")
	opTimeout := fs.Duration("op-timeout", 10*time.Second, "the clients' RADOS operation timeout")
	waitClean := fs.Bool("wait-clean", false, "after a fault wait for recovery to finish (PGs active+clean), not only for PGs active")
	dir := fs.String("dir", "", "directory for the cluster (default: a temp dir, removed at exit unless the run failed)")
	logFile := fs.String("log", "", "write the clients' debug log to this file")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	size, err := rbdSize(*imageSize, 1)
	if err != nil {
		return fmt.Errorf("-image-size: %w", err)
	}
	cfg := chaostest.Config{
		Seed: *seed, Duration: *duration, Workers: *workers, ImageSize: size,
		OpTimeout: *opTimeout, WaitClean: *waitClean, Out: stdout,
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano()) % 1_000_000
	}
	for _, p := range strings.Split(*paths, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Paths = append(cfg.Paths, p)
		}
	}
	switch *faults {
	case "all":
	case "none", "":
		cfg.Faults = []string{}
	default:
		for _, k := range strings.Split(*faults, ",") {
			k = strings.TrimSpace(k)
			if !slices.Contains(chaostest.AllFaults, k) {
				return fmt.Errorf("-faults: unknown kind %q (want %s)", k, strings.Join(chaostest.AllFaults, ", "))
			}
			cfg.Faults = append(cfg.Faults, k)
		}
	}
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	fmt.Fprintf(stdout, "purerbd chaos: booting a cluster (3 mons, 3 bluestore OSDs, a mgr) ...\n")
	c, err := cephcluster.Start(ctx, cephcluster.Options{
		Mons: 3, OSDs: 3, WithMgr: true, ObjectStore: cephcluster.StoreBluestore, Dir: *dir, KeepDir: *dir != "",
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
		return exitStatus(1)
	}
	return nil
}
