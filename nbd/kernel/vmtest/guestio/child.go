package guestio

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Child is a process started from the guest program's own binary (a
// server it kills and replaces), whose stdout lines it reads.
type Child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// StartChild starts the running binary again with args; name labels its
// output lines.
func StartChild(name string, args ...string) (*Child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{name: name, cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Printf("  [%s pid %d] %s\n", name, cmd.Process.Pid, sc.Text())
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c, nil
}

// Expect waits for a line that starts with word and returns its fields.
func (c *Child) Expect(ctx context.Context, word string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				err := c.cmd.Wait()
				return nil, fmt.Errorf("%s exited (%v) before saying %q", c.name, err, word)
			}
			f := strings.Fields(l)
			if len(f) > 0 && f[0] == word {
				return f, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no %q: %w", c.name, word, ctx.Err())
		}
	}
}

// Send writes a command line to the child's stdin.
func (c *Child) Send(cmd string) error {
	_, err := io.WriteString(c.stdin, cmd+"\n")
	return err
}

// Kill sends SIGKILL and reaps the process.
func (c *Child) Kill() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// Wait reaps a process that is ending on its own.
func (c *Child) Wait() error {
	for range c.lines {
	}
	return c.cmd.Wait()
}
