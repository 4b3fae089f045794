package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// startCSIBinary runs the purerbd-csi binary at path as the node plugin,
// serving on socketPath with its default settings (as the shipped node
// DaemonSet runs it, args adding to that): no NBD request timeout, one
// connection per device, requests a killed plugin held resent at the
// kernel's first look after its successor reattached. It waits until it
// answers a Probe, as the kubelet's registrar does. Its log lines go to
// stderr prefixed with name; startup is the time from exec to the first
// ready Probe (the node takes over what an earlier process staged before
// it serves).
func startCSIBinary(ctx context.Context, path, name string, args ...string) (*plugin, error) {
	args = append([]string{"--node", "--nodeid", "vm-node", "--endpoint", "unix://" + socketPath,
		"--cluster-config", configPath}, args...)
	cmd := exec.Command(path, args...)
	logs, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	p := &plugin{name: name, cmd: cmd, exited: make(chan error, 1)}
	go func() {
		prefixLines(os.Stderr, logs, fmt.Sprintf("  [%s pid %d] ", name, cmd.Process.Pid))
		p.exited <- cmd.Wait()
	}()
	// Reconnect quickly while the socket is missing: with grpc's default
	// backoff (1 s, then more) the first Probe's failure would hold the
	// next attempt a second, and startup would measure that instead.
	p.conn, err = grpc.NewClient("unix://"+socketPath, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1, MaxDelay: 10 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		p.kill()
		return nil, err
	}
	p.node = csipb.NewNodeClient(p.conn)
	ident := csipb.NewIdentityClient(p.conn)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		r, err := ident.Probe(ctx, &csipb.ProbeRequest{})
		if err == nil && r.GetReady().GetValue() {
			break
		}
		select {
		case werr := <-p.exited:
			p.exited <- werr
			p.kill()
			return nil, fmt.Errorf("%s exited before it served: %v", name, werr)
		case <-ctx.Done():
			p.kill()
			return nil, fmt.Errorf("%s does not answer Probe: %v", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.startup = time.Since(start).Seconds()
	fmt.Printf("  [%s pid %d] purerbd-csi started at %s, serves after %.2fs\n", name, cmd.Process.Pid, start.UTC().Format("15:04:05.000"), p.startup)
	return p, nil
}

// terminate sends the binary SIGTERM, as the kubelet does when it stops
// the container, and waits for its exit, which must be clean.
func (p *plugin) terminate(timeout time.Duration) error {
	p.conn.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		return err
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.name, timeout)
	}
}

// prefixLines copies r to w line by line, each line prefixed.
func prefixLines(w io.Writer, r io.Reader, prefix string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintf(w, "%s%s\n", prefix, sc.Text())
	}
}
