package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/purerbd/purerbd/internal/predecessor"
)

// runDirEnv names the directory of the role locks of `nbd map` and `nbd
// serve` (default /run/purerbd, or a per-user directory under the
// temporary directory where /run is not writable).
const runDirEnv = "PURERBD_RUN_DIR"

// imageRoleWait bounds the wait for another live server of the same
// image on this host: a server that is exiting lets go at once; one that
// keeps running is a concurrent server, not a predecessor.
const imageRoleWait = 2 * time.Second

// runDir returns the directory of the role locks.
func runDir() string {
	if d := os.Getenv(runDirEnv); d != "" {
		return d
	}
	const d = "/run/purerbd"
	if err := os.MkdirAll(d, 0o700); err == nil {
		if f, err := os.CreateTemp(d, ".probe"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return d
		}
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("purerbd-%d", os.Getuid()))
}

// takeImageRole takes this host's role of serving image sp writable, or
// returns nil (logged) when another live process holds it or the lock
// cannot be made: the image then opens as before, breaking a dead
// owner's lock only when its watch times out.
func takeImageRole(ctx context.Context, log *slog.Logger, sp imageSpec) *predecessor.Claim {
	ctx, cancel := context.WithTimeout(ctx, imageRoleWait)
	defer cancel()
	name := "image-" + url.PathEscape(sp.pool+"/"+sp.ns+"/"+sp.name) + ".lock"
	c, err := predecessor.Take(ctx, filepath.Join(runDir(), name), log)
	if err != nil {
		log.Info("not taking over from a previous server of this image", "image", sp.String(), "err", err)
		return nil
	}
	return c
}
