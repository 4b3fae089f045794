package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/internal/cli"
)

// Going to the background as rbd-nbd does: the command starts itself
// again in a new session, with the same arguments, standard input and
// output on /dev/null and its standard error on this one's; the child
// maps the device and writes the line map prints on a pipe, then drops
// its standard error; the parent prints that line and exits 0, or, if
// the child exits first, exits 1 (the child said why on standard error).

// daemonReadyEnv names, in a child, the descriptor of that pipe.
const daemonReadyEnv = "PURERBD_DAEMON_READY_FD"

// daemonReady returns, in a child started by startDaemon, the function
// that reports its line and detaches it from the parent's streams; nil
// in any other process.
func daemonReady() (func(line string) error, error) {
	v, ok := os.LookupEnv(daemonReadyEnv)
	if !ok {
		return nil, nil
	}
	_ = os.Unsetenv(daemonReadyEnv) // not for what this process starts
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q: want a descriptor", daemonReadyEnv, v)
	}
	pipe := os.NewFile(uintptr(fd), "daemon-ready")
	return func(line string) error {
		_, werr := io.WriteString(pipe, line+"\n")
		cerr := pipe.Close()
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer null.Close()
		// the parent's caller may wait for the end of this stream
		if err := unix.Dup3(int(null.Fd()), 2, 0); err != nil {
			return fmt.Errorf("detaching standard error: %w", err)
		}
		return errors.Join(werr, cerr)
	}, nil
}

// startDaemon starts this command again in the background and waits
// for its line (printed on stdout) or its exit.
func startDaemon(ctx context.Context, stdout, stderr io.Writer) error {
	path, err := daemonPath()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:        path,
		Args:        os.Args,
		Env:         append(os.Environ(), daemonReadyEnv+"=3"),
		ExtraFiles:  []*os.File{w},
		Stderr:      stderr,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("going to the background: %w", err)
	}
	w.Close()
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		if line == "" {
			_ = cmd.Wait()
			return cli.ExitStatus(1)
		}
		_, err := io.WriteString(stdout, line)
		_ = cmd.Process.Release()
		return err
	case <-ctx.Done():
		_ = cmd.Process.Signal(unix.SIGTERM)
		_ = cmd.Wait()
		return ctx.Err()
	}
}

// daemonPath is the program the child runs: the name this one was run
// under when it is rbd-nbd (a symlink), so that the child's command
// name is rbd-nbd too (Ceph's rbd-nbd list-mapped looks for it), else
// this executable.
func daemonPath() (string, error) {
	if filepath.Base(os.Args[0]) == "rbd-nbd" {
		if p, err := exec.LookPath(os.Args[0]); err == nil {
			return p, nil
		}
	}
	return os.Executable()
}
