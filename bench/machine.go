package bench

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Machine describes where the suite ran.
type Machine struct {
	Start     time.Time
	NProc     int
	CPUModel  string
	MemTotal  string
	Kernel    string
	GoVersion string
	LoadStart string // /proc/loadavg when the suite started
	LoadEnd   string // and when it ended
	Tools     []Tool // peers' versions
}

// Tool is one external program and its version line.
type Tool struct{ Name, Version string }

// loadavg returns the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// probeMachine records the machine and the versions of the peers.
func probeMachine(ctx context.Context) Machine {
	m := Machine{
		Start:     time.Now(),
		NProc:     runtime.NumCPU(),
		GoVersion: runtime.Version(),
		LoadStart: loadavg(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if l, _, ok := strings.Cut(string(b), "\n"); ok {
			m.MemTotal = strings.Join(strings.Fields(l)[1:], " ")
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	for _, t := range [][]string{
		{"ceph", "--version"}, {"fio", "--version"}, {"nbdkit", "--version"},
		{"nbdcopy", "--version"}, {"qemu-nbd", "--version"},
	} {
		m.Tools = append(m.Tools, Tool{Name: t[0], Version: toolVersion(ctx, t[0], t[1:]...)})
	}
	return m
}

// toolVersion is the first line a tool prints about its version, or
// "not installed".
func toolVersion(ctx context.Context, name string, args ...string) string {
	if _, err := exec.LookPath(name); err != nil {
		return "not installed"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if err != nil && line == "" {
		return "unknown (" + err.Error() + ")"
	}
	return line
}

// haveTools reports the first of names not found on PATH ("" if all are).
func haveTools(names ...string) string {
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			return n
		}
	}
	return ""
}
