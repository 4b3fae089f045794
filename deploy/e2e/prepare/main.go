// Command prepare fills the cache the Kubernetes e2e run (package
// deploy/e2e) needs, and times each part: the Kubernetes components
// built from source, helm, and the sidecar images built from their Go modules.
// `.ci/run` calls it so that a fresh machine pays for them once, before
// the tests; the tests would build what is missing themselves.
//
//	go run ./deploy/e2e/prepare
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e"
	"github.com/purerbd/purerbd/deploy/e2e/images"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "prepare:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	repo, err := images.FindRepoRoot(wd)
	if err != nil {
		return err
	}
	t0 := time.Now()
	bin, err := e2e.KubeBinary(ctx, repo, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Printf("prepare: Kubernetes components %s (%v)\n", bin, time.Since(t0).Round(time.Second))
	th := time.Now()
	helm, err := e2e.HelmBinary(ctx, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Printf("prepare: helm %s (%v)\n", helm, time.Since(th).Round(time.Second))
	t1 := time.Now()
	built, err := images.Build(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)), repo, images.DefaultCacheDir())
	if err != nil {
		return err
	}
	fmt.Printf("prepare: %d images (%v)\n", len(built.Images), time.Since(t1).Round(time.Second))
	return nil
}
