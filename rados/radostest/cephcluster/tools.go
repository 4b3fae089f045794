package cephcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ToolError is returned when one of Ceph's command-line tools fails.
type ToolError struct {
	Tool   string
	Args   []string
	Stderr string
	Err    error
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("%s %s: %v: %s", e.Tool, strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *ToolError) Unwrap() error { return e.Err }

// Tool runs one of Ceph's tools (ceph, rados, rbd, ...) against this
// cluster (with -c CONF) and returns its standard output.
func (c *Cluster) Tool(ctx context.Context, tool string, args ...string) ([]byte, error) {
	return c.ToolInput(ctx, nil, tool, args...)
}

// ToolInput is Tool with bytes for the tool's standard input.
func (c *Cluster) ToolInput(ctx context.Context, stdin []byte, tool string, args ...string) ([]byte, error) {
	full := append([]string{"-c", c.Conf}, args...)
	if tool == "ceph" {
		full = append([]string{"--connect-timeout", "15"}, full...)
	}
	cmd := c.command(ctx, tool, full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return out.Bytes(), &ToolError{Tool: tool, Args: args, Stderr: errb.String(), Err: err}
	}
	return out.Bytes(), nil
}

// ToolCommand returns a command that runs one of Ceph's tools against
// this cluster (with -c CONF) as Tool does, for callers that keep it
// running (rados watch, rbd watch): the release's own tool, in its root
// and the cluster's network namespace.
func (c *Cluster) ToolCommand(ctx context.Context, tool string, args ...string) *exec.Cmd {
	return c.command(ctx, tool, append([]string{"-c", c.Conf}, args...)...)
}

// Program runs any program of the cluster's release (python3 with its
// rados binding, say) where Tool runs Ceph's tools: in the release's root
// and the cluster's network namespace. Unlike Tool it adds no arguments.
func (c *Cluster) Program(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := c.command(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), &ToolError{Tool: bin, Args: args, Stderr: errb.String(), Err: err}
	}
	return out.Bytes(), nil
}

// Command returns a command that runs any program of the cluster's
// release as Program does (in its root and network namespace, no
// arguments added), for callers that set its environment or keep it
// running (fio with its rbd engine, qemu-nbd over librbd).
func (c *Cluster) Command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	return c.command(ctx, bin, args...)
}

// Root returns the root the cluster's daemons and tools run in, as the
// host sees it ("" for the host's own packages).
func (c *Cluster) Root() string { return c.root }

// Ceph runs the ceph CLI against the cluster.
func (c *Cluster) Ceph(ctx context.Context, args ...string) ([]byte, error) {
	return c.Tool(ctx, "ceph", args...)
}

// Rados runs the rados CLI against the cluster.
func (c *Cluster) Rados(ctx context.Context, args ...string) ([]byte, error) {
	return c.Tool(ctx, "rados", args...)
}

// Rbd runs the rbd CLI against the cluster.
func (c *Cluster) Rbd(ctx context.Context, args ...string) ([]byte, error) {
	return c.Tool(ctx, "rbd", args...)
}

// command returns a command that runs bin with args, inside the
// cluster's network namespace when it has one (`ip netns exec` enters it
// and execs bin: the process's PID is bin's).
func (c *Cluster) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	if c.root != "" {
		bin, args = c.chrootArgs(bin, args)
	}
	if c.Options.Netns != "" {
		return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.Options.Netns, bin}, args...)...)
	}
	return exec.CommandContext(ctx, bin, args...)
}

// findTCMalloc returns the path of libtcmalloc.so.4 where Debian-like
// (multiarch) or Fedora-like systems install it, or an error naming the
// package that does.
func findTCMalloc() (string, error) {
	for _, g := range []string{"/usr/lib/*-linux-gnu/libtcmalloc.so.4", "/usr/lib64/libtcmalloc.so.4", "/usr/lib/libtcmalloc.so.4"} {
		if m, _ := filepath.Glob(g); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", errors.New("cephcluster: libtcmalloc.so.4 not found, which the daemons run with " +
		"(as Ceph's own packages link it); install it with `make deps` (apt-get install libgoogle-perftools4) " +
		"or set Options.GlibcMalloc")
}

// checkBinaries fails with the Debian package names when a tool is
// missing, from the host or from root when one is given.
func checkBinaries(o Options, root string) error {
	bins := []string{"ceph-mon", "ceph-osd", "ceph", "rados", "rbd", "monmaptool"}
	if o.WithMgr {
		bins = append(bins, "ceph-mgr")
	}
	if o.Netns != "" {
		if _, err := exec.LookPath("ip"); err != nil {
			return fmt.Errorf("cephcluster: Options.Netns needs the ip command: apt-get install iproute2")
		}
	}
	var missing []string
	for _, b := range bins {
		if root != "" {
			if !inRoot(root, b) {
				missing = append(missing, b)
			}
		} else if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 && root != "" {
		return fmt.Errorf("cephcluster: Ceph binaries missing from the root %s: %s; remove it and run "+
			"rados/radostest/cephcluster/roots/build-root.sh again", root, strings.Join(missing, ", "))
	}
	if len(missing) > 0 {
		return fmt.Errorf("cephcluster: Ceph binaries missing: %s; install them with `make deps` "+
			"(apt-get install ceph-mon ceph-osd ceph-mgr ceph-common)", strings.Join(missing, ", "))
	}
	return nil
}

// inRoot reports whether root holds the executable bin in a standard
// directory.
func inRoot(root, bin string) bool {
	for _, d := range []string{"/usr/bin", "/usr/sbin", "/bin", "/sbin"} {
		if fi, err := os.Stat(filepath.Join(root, d, bin)); err == nil && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
