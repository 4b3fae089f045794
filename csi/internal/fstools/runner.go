package fstools

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Runner runs the file system programs from where they are.
type Runner struct {
	// Dir, when set, holds the programs, run as they are (static builds,
	// or a directory the image provides).
	Dir string
	// Root, when set (and Dir is not), is a root file system holding the
	// programs in its sbin or bin directories, typically the host's
	// mounted into the plugin's container at /host. They run chroot'ed
	// into it, so they find their libraries there; device nodes and mount
	// points must be visible at the same paths inside it (the host's /dev,
	// and the kubelet directory with mount propagation).
	Root string
	// Timeout bounds one run (default 10 minutes: mkfs.xfs on a large
	// volume takes a while).
	Timeout time.Duration
}

// searchDirs are where programs are looked for under Root, and on the
// plugin's own file system when neither Dir nor Root is set.
var searchDirs = []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/local/bin"}

// LookPath finds prog on the plugin's own file system: on $PATH, else in
// the sbin and bin directories (which not every $PATH names).
func LookPath(prog string) (string, error) {
	p, err := exec.LookPath(prog)
	if err == nil {
		return p, nil
	}
	for _, d := range searchDirs {
		if st, serr := os.Stat(filepath.Join(d, prog)); serr == nil && st.Mode().IsRegular() {
			return filepath.Join(d, prog), nil
		}
	}
	return "", err
}

// command returns a command that runs prog with args.
func (t Runner) command(ctx context.Context, prog string, args ...string) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	switch {
	case t.Dir != "":
		p := filepath.Join(t.Dir, prog)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s is not in the tools directory %s: %w", prog, t.Dir, err)
		}
		cmd = exec.CommandContext(ctx, p, args...)
	case t.Root != "":
		var inside string
		for _, d := range searchDirs {
			if st, err := os.Stat(filepath.Join(t.Root, d, prog)); err == nil && st.Mode().IsRegular() {
				inside = filepath.Join(d, prog)
				break
			}
		}
		if inside == "" {
			return nil, fmt.Errorf("%s is not in %s under %s: %w", prog, strings.Join(searchDirs, ", "), t.Root, fs.ErrNotExist)
		}
		cmd = exec.CommandContext(ctx, inside, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: t.Root}
		cmd.Dir = "/"
	default:
		p, err := LookPath(prog)
		if err != nil {
			return nil, fmt.Errorf("%s not found (configure a tools directory or the host root): %w", prog, err)
		}
		cmd = exec.CommandContext(ctx, p, args...)
	}
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

// Run runs prog and returns its combined output; the error carries the
// end of that output.
func (t Runner) Run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd, err := t.command(ctx, prog, args...)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 2000 {
			msg = "..." + msg[len(msg)-2000:]
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, msg)
	}
	return out.Bytes(), nil
}
