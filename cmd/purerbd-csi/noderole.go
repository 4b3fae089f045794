package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/purerbd/purerbd/internal/predecessor"
)

// nodeRoleLock is the node plugin's role lock in its state directory.
const nodeRoleLock = "node.lock"

// nodeRoleWait bounds the wait for a previous node plugin that still
// runs (one shutting down while its successor starts).
const nodeRoleWait = 30 * time.Second

// takeNodeRole takes the node plugin's role on this node, or returns nil
// (logged) when it cannot: the plugin then works as before, breaking a
// dead predecessor's locks only when their watches time out.
func takeNodeRole(ctx context.Context, log *slog.Logger, stateDir string) *predecessor.Claim {
	ctx, cancel := context.WithTimeout(ctx, nodeRoleWait)
	defer cancel()
	c, err := predecessor.Take(ctx, filepath.Join(stateDir, nodeRoleLock), log)
	if err != nil {
		log.Warn("going on without the node role lock: a dead predecessor's locks will be taken over only when its watches time out", "err", err)
		return nil
	}
	return c
}

// settleWhenDone returns the node's TookOver hook: once every staged
// volume was taken over, the predecessors' clients need no fencing by
// the next process.
func settleWhenDone(c *predecessor.Claim, log *slog.Logger) func(volumes, failed int) {
	if c == nil {
		return nil
	}
	return func(volumes, failed int) {
		if failed > 0 {
			log.Info("keeping the previous plugins' clients for the next process to fence: not every volume was taken over", "failed", failed)
			return
		}
		if err := c.Settle(); err != nil {
			log.Warn("the node role record", "err", err)
		}
	}
}
