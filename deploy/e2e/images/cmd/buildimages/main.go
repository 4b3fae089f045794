// Command buildimages builds every image of the e2e Kubernetes run into
// the cache (see package images), once, and prints what it made and how
// long each step took: the sidecars take minutes the first time, nothing
// after; the checkout's own images take seconds every time.
//
//	go run ./deploy/e2e/images/cmd/buildimages [-cache DIR] [-repo DIR] [-json]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/purerbd/purerbd/deploy/e2e/images"
)

func main() {
	cache := flag.String("cache", images.DefaultCacheDir(), "cache root (the images go under DIR/e2e; default $"+images.CacheEnv+" or /var/cache/purerbd)")
	repo := flag.String("repo", "", "purerbd checkout (default: the one holding the working directory)")
	asJSON := flag.Bool("json", false, "print the result as JSON")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *repo, *cache, *asJSON, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "buildimages:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, repo, cache string, asJSON bool, out io.Writer) error {
	if repo == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if repo, err = images.FindRepoRoot(wd); err != nil {
			return err
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	start := time.Now()
	set, err := images.Build(ctx, log, repo, cache)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(set)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STEP\tTOOK\t")
	for _, s := range set.Steps {
		cached := ""
		if s.Cached {
			cached = "(cached)"
		}
		fmt.Fprintf(w, "%s\t%v\t%s\n", s.Name, s.Took.Round(time.Millisecond), cached)
	}
	fmt.Fprintf(w, "total\t%v\t\n\nIMAGE\tSIZE\tTAR\n", time.Since(start).Round(time.Millisecond))
	for _, im := range set.Images {
		size := "?"
		if st, err := os.Stat(im.Tar); err == nil {
			size = fmt.Sprintf("%.1f MiB", float64(st.Size())/(1<<20))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", im.Ref, size, im.Tar)
	}
	fmt.Fprintln(w)
	for _, f := range set.SnapshotCRDs {
		fmt.Fprintf(w, "snapshot CRD\t\t%s\n", f)
	}
	for _, f := range set.SnapshotController {
		fmt.Fprintf(w, "snapshot-controller\t\t%s\n", f)
	}
	return w.Flush()
}
