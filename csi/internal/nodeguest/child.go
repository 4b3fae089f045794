package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// plugin is a running node plugin process, nodeguest's own (startPlugin)
// or the purerbd-csi binary (startCSIBinary), and a CSI client of it.
type plugin struct {
	name  string
	cmd   *exec.Cmd
	lines chan string
	conn  *grpc.ClientConn
	node  csipb.NodeClient
	// startup is how long the plugin's Start took, by its own account
	// (the wrapper) or from exec to the first ready Probe (the binary).
	startup float64
	// exited, for the binary, gets the exit status once its log is
	// drained; the wrapper is reaped by Wait.
	exited chan error
}

// startPlugin starts a plugin process and waits until it serves.
func startPlugin(ctx context.Context, name string, args ...string) (*plugin, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{"plugin", "-socket", socketPath, "-key", cephKey, "-io-timeout", ioTimeout.String()}, args...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &plugin{name: name, cmd: cmd, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Printf("  [%s pid %d] %s\n", name, cmd.Process.Pid, sc.Text())
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	f, err := p.expect(ctx, "ready")
	if err != nil {
		p.kill()
		return nil, err
	}
	fmt.Sscan(f[1], &p.startup)
	p.conn, err = grpc.NewClient("unix://"+socketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.kill()
		return nil, err
	}
	p.node = csipb.NewNodeClient(p.conn)
	return p, nil
}

// expect waits for a line that starts with word and returns its fields.
func (p *plugin) expect(ctx context.Context, words ...string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				err := p.cmd.Wait()
				return nil, fmt.Errorf("%s exited (%v) before saying %q", p.name, err, words)
			}
			if f := strings.Fields(l); len(f) > 0 && slices.Contains(words, f[0]) {
				return f, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no %q: %w", p.name, words, ctx.Err())
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (p *plugin) kill() {
	if p.conn != nil {
		p.conn.Close()
	}
	p.cmd.Process.Kill()
	if p.exited != nil {
		<-p.exited
		return
	}
	p.cmd.Wait()
}

// stop sends SIGTERM and waits for the orderly exit; it returns how long
// the plugin said its handover took.
func (p *plugin) stop(ctx context.Context) (float64, error) {
	p.conn.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	f, err := p.expect(ctx, "closed")
	if err != nil {
		return 0, err
	}
	var d float64
	fmt.Sscan(f[1], &d)
	for range p.lines {
	}
	return d, p.cmd.Wait()
}
