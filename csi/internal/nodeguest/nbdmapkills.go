package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// mapCookie names the device `purerbd nbd map` attaches, for --reattach.
const mapCookie = "guest-map"

// mapProc is a running `purerbd nbd map`.
type mapProc struct {
	cmd    *exec.Cmd
	device string
}

// startMap runs `purerbd nbd map` of the map image at its default
// settings (reattaching with -reattach), and waits for the device it
// prints.
func (r *rbdScenario) startMap(ctx context.Context, name string, reattach bool) (*mapProc, error) {
	args := []string{"-m", r.mon, "-k", "/etc/ceph/keyring", "nbd", "map", r.pool + "/" + r.mapImage, "--cookie", mapCookie}
	if reattach {
		args = append(args, "--reattach")
	}
	cmd := exec.Command(r.purerbd, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logs, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go prefixLines(os.Stderr, logs, fmt.Sprintf("  [%s pid %d] ", name, cmd.Process.Pid))
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case dev := <-line:
		if !strings.HasPrefix(dev, "/dev/nbd") {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("%s printed %q, not a device", name, dev)
		}
		return &mapProc{cmd: cmd, device: dev}, nil
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s printed no device", name)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, ctx.Err()
	}
}

// mapKills is issue #25's experiment for `purerbd nbd map`: the image is
// mapped at the defaults, a writer streams synced chunks onto the
// device, the map process is SIGKILLed r.kills times and a `nbd map
// --reattach` started at once each time; the stalls are reported as for
// the plugin. Then what the writer wrote reads back (O_DIRECT) through
// the last process, the device is unmapped, and "MAP <sha256> <bytes>"
// lets the host compare with `rbd export`.
func (r *rbdScenario) mapKills(ctx context.Context) error {
	m, err := r.startMap(ctx, "map-0", false)
	if err != nil {
		return err
	}
	defer func() {
		if m != nil {
			_ = m.cmd.Process.Kill()
			_ = m.cmd.Wait()
		}
	}()
	w := startStreamWriter(m.device)
	var stalls, restarts []float64
	for i := range r.kills {
		if !w.WaitProgress(2, 2*time.Minute) {
			return fmt.Errorf("kill %d: the writer on %s does not progress", i+1, m.device)
		}
		before, base := w.LastSync(), w.Synced()
		killed := time.Now()
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
		dev := m.device
		m = nil
		if m, err = r.startMap(ctx, fmt.Sprintf("map-%d", i+1), true); err != nil {
			return fmt.Errorf("kill %d: reattach: %w", i+1, err)
		}
		if m.device != dev {
			return fmt.Errorf("kill %d: reattached %s, not %s", i+1, m.device, dev)
		}
		restarts = append(restarts, time.Since(killed).Seconds())
		for w.Synced() <= base {
			if time.Since(killed) > 2*time.Minute {
				return fmt.Errorf("kill %d: the writer is still blocked", i+1)
			}
			time.Sleep(5 * time.Millisecond)
		}
		stalls = append(stalls, w.LastSync().Sub(before).Seconds())
		fmt.Printf("### nbd map kill %d: reattached after %.2fs; stall %.2fs\n", i+1, restarts[i], stalls[i])
	}
	if !w.WaitProgress(2, 2*time.Minute) {
		return errors.New("the writer does not progress after the last reattach")
	}
	res := w.Finish()
	if res.Err != nil {
		return fmt.Errorf("the writer on the mapped device: %w", res.Err)
	}
	mx := r.recordStalls("nbd map kills:", "nbd map", stalls)
	r.recordRestarts("nbd map kills: SIGKILL to reattached", restarts)
	back, err := directRead(m.device, int(res.Bytes), 0)
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(back); hex.EncodeToString(sum[:]) != res.Sum {
		return errors.New("the mapped device reads other bytes than the writer wrote across the kills")
	}
	if out, err := exec.CommandContext(ctx, r.purerbd, "nbd", "unmap", m.device).CombinedOutput(); err != nil {
		return fmt.Errorf("nbd unmap: %v: %s", err, out)
	}
	if err := m.cmd.Wait(); err != nil {
		return fmt.Errorf("the map process after unmap: %w", err)
	}
	m = nil
	fmt.Printf("MAP %s %d\n", res.Sum, res.Bytes)
	if mx >= stallBound.Seconds() {
		return fmt.Errorf("the writer stalled %.1fs across a reattach", mx)
	}
	return nil
}
