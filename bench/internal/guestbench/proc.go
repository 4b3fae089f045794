package guestbench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat.
const clockTicks = 100

// procStat is the fields of /proc/PID/stat after the command, which
// may itself hold spaces and parentheses: state(0) ppid(1) ... flags(6)
// ... utime(11) stime(12) ...
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return strings.Fields(s[i+1:]), nil
}

// procCPU is the CPU seconds (user + system) pid has used.
func procCPU(pid int) (float64, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, f)
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, f)
	}
	return (u + st) / clockTicks, nil
}

// procMem returns VmRSS and VmHWM of pid in bytes.
func procMem(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 1 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			hwm = n << 10
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return rss, hwm, nil
}

// child is a process of the guest whose stdout is read line by line.
type child struct {
	name  string
	cmd   *exec.Cmd
	lines chan string
	done  chan error
}

// startChild starts name with args; its stderr goes to the console,
// prefixed.
func startChild(name string, args ...string) (*child, error) {
	return startChildEnv(nil, name, args...)
}

// startChildEnv is startChild with env added to the guest program's
// environment.
func startChildEnv(env []string, name string, args ...string) (*child, error) {
	cmd := exec.Command(name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = prefixWriter{name}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, lines: make(chan string, 64), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	return c, nil
}

// line waits for the next line of stdout.
func (c *child) line(ctx context.Context, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case l, ok := <-c.lines:
		if !ok {
			return "", fmt.Errorf("%s exited: %v", c.name, <-c.done)
		}
		return l, nil
	case <-ctx.Done():
		return "", fmt.Errorf("%s: no output: %w", c.name, ctx.Err())
	}
}

// stop sends SIGTERM and waits (SIGKILL after 30 s).
func (c *child) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	go func() {
		for range c.lines {
		}
	}()
	select {
	case err := <-c.done:
		return err
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		return fmt.Errorf("%s: killed after 30 s", c.name)
	}
}

// prefixWriter copies a child's stderr to the console, each write
// prefixed with its name.
type prefixWriter struct{ name string }

func (p prefixWriter) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintf(os.Stderr, "  [%s] %s\n", p.name, l)
	}
	return len(b), nil
}
