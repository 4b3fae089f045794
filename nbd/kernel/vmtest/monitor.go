package vmtest

import (
	"context"
	"fmt"
)

// Monitor reaches the human monitor of a run's qemu, for a caller that
// reads the emulator's own counters ("info jit") while the guest runs.
// Each Do dials the monitor, runs one command and hangs up: qemu serves
// one monitor client at a time, and the boot's own watchdog (a stall
// before init, a lockup) must still reach it between the caller's
// commands.
type Monitor struct {
	sock string
}

// Do runs one monitor command and returns its output, the command's
// echo included; ctx bounds the whole exchange.
func (m Monitor) Do(ctx context.Context, cmd string) (string, error) {
	c, err := dialMonitor(ctx, m.sock)
	if err != nil {
		return "", fmt.Errorf("vmtest: qemu's monitor: %w", err)
	}
	defer c.conn.Close()
	out, err := c.do(cmd)
	if err != nil {
		return "", fmt.Errorf("vmtest: qemu's monitor: %s: %w", cmd, err)
	}
	return out, nil
}
