package main

import (
	"bytes"
	"context"
	"crypto/rand"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/purerbd/purerbd/nbd/nbdtest"
	"github.com/purerbd/purerbd/rados/radostest"
)

// TestNBDServeRestartAfterSIGKILL is the experiment as a user
// runs it, at Ceph's default settings (osd_client_watch_timeout 30 s):
// `purerbd nbd serve --image` of an image with exclusive-lock is
// SIGKILLed while nbdcopy writes into it, and started again at once on
// the same export, 20 times. The dead server's lock and watch stay on
// the OSD; the new server proves its predecessor dead (the role lock
// under PURERBD_RUN_DIR), fences exactly its client and takes the lock
// over, so its first write lands long before the dead watch would time
// out (the 15 s bound; without the takeover it cannot be met). Then
// nbdcopy writes the whole file again and `rbd export` (librbd) reads it
// back.
func TestNBDServeRestartAfterSIGKILL(t *testing.T) {
	const restarts = 20
	radostest.SkipShort(t)
	bin := buildBinary(t)
	// Ceph's default paxos_propose_interval (the test clusters commit
	// every 0.1 s): it paces the commit of the fencing.
	c := radostest.New(t, radostest.Options{Conf: map[string]string{"paxos_propose_interval": "1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if out, err := c.Rbd(ctx, "create", "--size", "64M", "--image-feature", "layering,exclusive-lock,object-map,fast-diff", "rbd/restart"); err != nil {
		t.Fatalf("rbd create: %v: %s", err, out)
	}
	dir := t.TempDir()
	data := make([]byte, 48<<20)
	rand.Read(data)
	file := filepath.Join(dir, "data")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "nbd.sock")
	uri := "nbd+unix:///?socket=" + socket
	serve := func() (*exec.Cmd, *bytes.Buffer) {
		return startServeBinary(t, bin, c.Conf, filepath.Join(dir, "run"), "--image", "rbd/restart", "--socket", socket)
	}
	cur, _ := serve()
	waitSocket(t, socket, 60*time.Second)
	var stderr *bytes.Buffer
	var took []float64
	for i := range restarts {
		copier := exec.Command("nbdcopy", file, uri)
		if err := copier.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(100+mrand.IntN(300)) * time.Millisecond)
		if err := cur.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cur.Wait()
		restarted := time.Now()
		cur, stderr = serve()
		_ = copier.Wait() // it failed when its server died, or finished before

		wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
		for {
			cl, err := nbdtest.Dial(wctx, "unix", socket, nbdtest.Options{})
			if err == nil {
				err = cl.WriteAt(wctx, data[:4096], 0, 0)
				cl.Close()
				if err != nil {
					t.Fatalf("restart %d: first write: %v\n%s", i+1, err, stderr)
				}
				break
			}
			if wctx.Err() != nil {
				t.Fatalf("restart %d: no write possible %v after the restart (a dead owner's watch lives 30 s): %v\n%s",
					i+1, time.Since(restarted).Round(time.Millisecond), err, stderr)
			}
			time.Sleep(10 * time.Millisecond)
		}
		wcancel()
		took = append(took, time.Since(restarted).Seconds())
	}
	slices.Sort(took)
	t.Logf("restart to first write over %d SIGKILLs: median %.2fs, p99 %.2fs, max %.2fs",
		len(took), took[len(took)/2], took[max(0, (len(took)*99+99)/100-1)], took[len(took)-1])
	second := cur

	runTool(t, "nbdcopy", file, uri)
	_ = second.Process.Signal(os.Interrupt)
	_ = second.Wait()
	got := filepath.Join(dir, "export")
	if out, err := c.Rbd(ctx, "export", "rbd/restart", got); err != nil {
		t.Fatalf("rbd export: %v: %s", err, out)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:len(data)], data) {
		t.Fatal("rbd export differs from what nbdcopy wrote through the restarted server")
	}
}

// startServeBinary starts the built `purerbd nbd serve` with args, its role locks under
// runDir, killed at the end of the test; its standard error is kept.
func startServeBinary(t *testing.T, bin, conf, runDir string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-c", conf, "nbd", "serve"}, args...)...)
	cmd.Env = append(cleanEnv(), runDirEnv+"="+runDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, &stderr
}

// waitSocket waits until a unix socket accepts connections.
func waitSocket(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if conn, err := net.Dial("unix", path); err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket at %s after %v", path, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
