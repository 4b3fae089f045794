package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, which
// the kernel fixes at 100 for every architecture's user ABI.
const userHZ = 100

// usage is a process's CPU time and peak RSS.
type usage struct {
	CPU float64 // user + system seconds
	RSS int64   // peak resident set, bytes
}

// childResult is what a finished child process left behind.
type childResult struct {
	Stdout, Stderr []byte
	Wall           time.Duration
	usage
}

// runChild runs a command to completion, with env added to the
// environment, and returns its output and resource usage (getrusage
// through wait4: every thread of the child and the descendants it
// waited for).
func runChild(ctx context.Context, dir string, env []string, name string, args ...string) (childResult, error) {
	return runCmd(exec.CommandContext(ctx, name, args...), dir, env)
}

// runCmd is runChild for a command made elsewhere (a release's tool in
// its root, cluster.command).
func runCmd(cmd *exec.Cmd, dir string, env []string) (childResult, error) {
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	// in a process group of its own, so that a timeout kills whatever
	// the child started too; and killed if the suite dies
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	r := childResult{Stdout: out.Bytes(), Stderr: errb.Bytes(), Wall: time.Since(t0)}
	if cmd.ProcessState != nil {
		r.usage = rusageOf(cmd.ProcessState)
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, lastLines(errb.Bytes(), 5))
	}
	return r, nil
}

// launcher makes the command that runs a program with its arguments:
// the host's (hostCommand) or a Ceph release's own, in its root
// (cluster.command).
type launcher func(ctx context.Context, name string, args ...string) *exec.Cmd

// hostCommand runs the host's program.
func hostCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, name, args...)
}

func rusageOf(ps *os.ProcessState) usage {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return usage{}
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return usage{CPU: tv(ru.Utime) + tv(ru.Stime), RSS: ru.Maxrss << 10} // Maxrss is in KiB on Linux
}

// lastLines returns the last n lines of b, for error messages.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// daemon is a long-running child (an NBD server) whose usage is sampled
// from /proc while it runs.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // of Wait, valid once done is closed
	log  *os.File
}

// startDaemon starts a server with its output going to logPath.
func startDaemon(logPath string, cmd *exec.Cmd) (*daemon, error) {
	name := cmd.Args[0]
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{}), log: f}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	return d, nil
}

// startServer removes a stale socket, starts the server and waits until
// it accepts connections on sock; on failure the server is stopped.
func startServer(ctx context.Context, logPath, sock, name string, args ...string) (*daemon, error) {
	return startServerCmd(ctx, logPath, sock, exec.Command(name, args...))
}

// startServerCmd is startServer for a command made elsewhere (qemu-nbd
// of a release, in its root).
func startServerCmd(ctx context.Context, logPath, sock string, cmd *exec.Cmd) (*daemon, error) {
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	d, err := startDaemon(logPath, cmd)
	if err != nil {
		return nil, err
	}
	if err := d.waitSocket(ctx, sock); err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

// waitSocket waits until the daemon accepts connections on the Unix
// socket path (the caller removes any stale socket before starting it).
func (d *daemon) waitSocket(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("%s exited before listening: %v: %s", d.name, d.err, d.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s: no socket %s: %w", d.name, path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (d *daemon) logTail() string {
	b, _ := os.ReadFile(d.log.Name())
	return lastLines(b, 5)
}

// usage reads the daemon's CPU time so far and its peak RSS from /proc.
func (d *daemon) usage() (usage, error) {
	return procUsage(d.cmd.Process.Pid)
}

// stop ends the daemon with SIGTERM (SIGKILL after 10 s) and returns its
// final usage.
func (d *daemon) stop() usage {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	d.log.Close()
	return rusageOf(d.cmd.ProcessState)
}

// procCPU reads a process's CPU time so far (utime+stime of every
// thread, seconds) from /proc/PID/stat.
func procCPU(pid int) (float64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: CPU time of pid %d: %w", pid, err)
	}
	return parseStatCPU(stat)
}

// parseStatCPU returns utime+stime, in seconds, of the contents of a
// /proc/PID/stat file.
func parseStatCPU(stat []byte) (float64, error) {
	// the command name may hold spaces: fields start after the last ')'
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("bench: malformed /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("bench: short /proc stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64) // field 14, utime
	st, err2 := strconv.ParseUint(f[12], 10, 64) // field 15, stime
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("bench: /proc stat: %w", err)
	}
	return float64(ut+st) / userHZ, nil
}

// procUsage reads utime+stime from /proc/PID/stat and VmHWM from
// /proc/PID/status.
func procUsage(pid int) (usage, error) {
	cpu, err := procCPU(pid)
	if err != nil {
		return usage{}, err
	}
	u := usage{CPU: cpu}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			u.RSS = kb << 10
		}
	}
	return u, nil
}
