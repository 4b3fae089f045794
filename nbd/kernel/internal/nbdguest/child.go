package main

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

// child is a server process started from this binary.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startChild(name string, args ...string) (*child, error) {
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
	c := &child{name: name, cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
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

// expect waits for a line that starts with word and returns its fields.
func (c *child) expect(ctx context.Context, word string) ([]string, error) {
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

func (c *child) send(cmd string) error {
	_, err := io.WriteString(c.stdin, cmd+"\n")
	return err
}

// kill sends SIGKILL and reaps the process.
func (c *child) kill() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// wait reaps a process that is ending on its own.
func (c *child) wait() error {
	for range c.lines {
	}
	return c.cmd.Wait()
}
