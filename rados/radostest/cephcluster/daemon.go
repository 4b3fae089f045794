package cephcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// daemon is one ceph-mon/ceph-osd/ceph-mgr process run in the foreground.
type daemon struct {
	name string   // "mon.a"
	bin  string   // "ceph-mon"
	args []string // after -c CONF
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
	// stopped is set when we stopped it on purpose (Kill, Stop, Close):
	// only other exits count as a daemon dying on its own.
	stopped bool
}

// ErrUnknownDaemon is returned for a name the cluster never started.
var ErrUnknownDaemon = errors.New("cephcluster: unknown daemon")

// spawn starts (or restarts) the named daemon.
func (c *Cluster) spawn(name, bin string, args ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("cephcluster: cluster closed")
	}
	d := c.daemons[name]
	if d == nil {
		d = &daemon{name: name, bin: bin, args: args}
		c.daemons[name] = d
		c.order = append(c.order, name)
	} else if d.running() {
		return nil
	}
	out, err := os.OpenFile(filepath.Join(c.Dir, "log", name+".stdout"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cephcluster: %s: %w", name, err)
	}
	defer out.Close()
	cmd := c.command(context.Background(), d.bin, append([]string{"-f", "-c", c.Conf}, d.args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = c.Dir
	if c.preload != "" {
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+c.preload)
	}
	// Own process group (a terminal's Ctrl-C reaches us, not the daemons:
	// we stop them in order), and SIGKILL if we die without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cephcluster: starting %s: %w", name, err)
	}
	d.cmd = cmd
	d.stopped = false
	d.done = make(chan struct{})
	go func(done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(d.done)
	return nil
}

func (d *daemon) running() bool {
	if d.cmd == nil {
		return false
	}
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// PID returns the process id of a running daemon, or 0.
func (c *Cluster) PID(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.daemons[name]; d != nil && d.running() {
		return d.cmd.Process.Pid
	}
	return 0
}

// Kill sends SIGKILL to a daemon and waits for it to exit. A memstore OSD
// comes back empty after this; use bluestore for crash tests.
func (c *Cluster) Kill(name string) error { return c.signalAndWait(name, true, 0) }

// Stop stops a daemon cleanly (SIGTERM, then SIGKILL after 60 s).
func (c *Cluster) Stop(name string) error { return c.signalAndWait(name, false, 60*time.Second) }

// Pause stops a daemon with SIGSTOP and waits until every thread of it
// has stopped; Resume continues it.
//
// The signal alone is not enough: kill(2) returns before the group stop
// has reached every thread, and on a loaded machine a monitor was seen
// answering a command 4 ms after SIGSTOP had been sent.
func (c *Cluster) Pause(name string) error {
	if err := c.signal(name, syscall.SIGSTOP); err != nil {
		return err
	}
	pid := c.PID(name)
	if pid == 0 {
		return fmt.Errorf("cephcluster: %s exited while being paused", name)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err := runningThreads(pid)
		if err != nil {
			return fmt.Errorf("cephcluster: pausing %s: %w", name, err)
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cephcluster: %s (pid %d): %d threads still running 10 s after SIGSTOP", name, pid, running)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads of process pid that are not stopped
// (state T in /proc/PID/task/TID/stat).
func runningThreads(pid int) (int, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return 0, err
	}
	if len(stats) == 0 {
		return 0, fmt.Errorf("no threads in /proc/%d/task", pid)
	}
	n := 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // the thread exited
			}
			return 0, err
		}
		// "TID (comm) STATE ...": comm may hold spaces and parentheses
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return 0, fmt.Errorf("%s: unexpected %q", p, b)
		}
		switch b[i+2] {
		case 'T', 't', 'Z', 'X': // stopped, or exited
		default:
			n++
		}
	}
	return n, nil
}

// Resume continues a daemon paused with Pause.
func (c *Cluster) Resume(name string) error { return c.signal(name, syscall.SIGCONT) }

// Start restarts a daemon that was stopped or killed. It does not wait
// for the daemon to rejoin; see WaitOSDsUp and WaitQuorum.
func (c *Cluster) Start(name string) error {
	c.mu.Lock()
	d := c.daemons[name]
	c.mu.Unlock()
	if d == nil {
		return fmt.Errorf("%w %q", ErrUnknownDaemon, name)
	}
	return c.spawn(name, d.bin, d.args...)
}

func (c *Cluster) signal(name string, sig syscall.Signal) error {
	c.mu.Lock()
	d := c.daemons[name]
	c.mu.Unlock()
	if d == nil {
		return fmt.Errorf("%w %q", ErrUnknownDaemon, name)
	}
	if !d.running() {
		return fmt.Errorf("cephcluster: %s is not running", name)
	}
	return d.cmd.Process.Signal(sig)
}

func (c *Cluster) signalAndWait(name string, kill bool, grace time.Duration) error {
	c.mu.Lock()
	d := c.daemons[name]
	c.mu.Unlock()
	if d == nil {
		return fmt.Errorf("%w %q", ErrUnknownDaemon, name)
	}
	c.mu.Lock()
	d.stopped = true
	c.mu.Unlock()
	if !d.running() {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGCONT) // a paused daemon cannot handle SIGTERM
	if !kill {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
			return nil
		case <-time.After(grace):
		}
	}
	_ = d.cmd.Process.Kill()
	select {
	case <-d.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("cephcluster: %s (pid %d) did not exit after SIGKILL", name, d.cmd.Process.Pid)
	}
}

// exited reports a daemon that died on its own, for error messages.
func (c *Cluster) exited() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.order {
		d := c.daemons[n]
		if d.cmd != nil && !d.stopped && !d.running() {
			out = append(out, fmt.Sprintf("%s exited on its own", n))
		}
	}
	return out
}

// logTails returns the last lines of every daemon's log, for failures.
func (c *Cluster) logTails(lines int) string {
	var sb strings.Builder
	for _, e := range c.exited() {
		sb.WriteString("\n" + e)
	}
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "log", "*"))
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(ls) > lines {
			ls = ls[len(ls)-lines:]
		}
		fmt.Fprintf(&sb, "\n--- %s (last %d lines)\n%s", filepath.Base(p), len(ls), strings.Join(ls, "\n"))
	}
	return sb.String()
}

// LogTails returns the last n lines of every log of the cluster.
func (c *Cluster) LogTails(n int) string { return c.logTails(n) }

// waitUntil polls check until it succeeds or ctx ends.
func (c *Cluster) waitUntil(ctx context.Context, what string, check func(ctx context.Context) error) error {
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		if dead := c.exited(); len(dead) > 0 {
			return fmt.Errorf("cephcluster: waiting for %s: %s", what, strings.Join(dead, "; "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cephcluster: waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
