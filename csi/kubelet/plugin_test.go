package kubelet_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/fakestore"
	"github.com/purerbd/purerbd/internal/syncbuf"
)

// logBuffer collects log output written from several goroutines.
type logBuffer struct{ syncbuf.Buffer }

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// tempDir is a short directory: unix socket paths are limited to 107
// bytes, and t.TempDir's names can be long.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// clusterConfig writes a cluster config naming one cluster, "c1", with
// the given monitors, and returns its path.
func clusterConfig(t *testing.T, dir string, mons ...string) string {
	t.Helper()
	quoted := ""
	for i, m := range mons {
		if i > 0 {
			quoted += ","
		}
		quoted += fmt.Sprintf("%q", m)
	}
	p := filepath.Join(dir, "config.json")
	if err := os.WriteFile(p, []byte(`[{"clusterID":"c1","monitors":[`+quoted+`]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startDriver serves a driver for cfg on a socket in a directory of its
// own until the test ends, and returns the socket's path. Endpoint,
// ClusterConfigPath and Logger are filled in when empty.
func startDriver(t *testing.T, cfg csi.Config) string {
	t.Helper()
	dir := tempDir(t)
	sock := filepath.Join(dir, "csi.sock")
	cfg.Endpoint = "unix://" + sock
	if cfg.ClusterConfigPath == "" {
		cfg.ClusterConfigPath = clusterConfig(t, dir, "192.0.2.1:3300")
	}
	var logs logBuffer
	if cfg.Logger == nil {
		cfg.Logger = logs.logger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- csi.NewDriver(cfg).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("driver: %v", err)
		}
		if t.Failed() {
			t.Logf("driver log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return sock
		}
		select {
		case err := <-done:
			t.Fatalf("driver ended before serving: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the driver made no socket in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startController serves a controller on the in-memory fake image store
// (csi/fakestore), whose cluster "c1" answers.
func startController(t *testing.T, name string) string {
	st := fakestore.New()
	st.AddCluster("c1", nil)
	return startDriver(t, csi.Config{DriverName: name, Controller: true, Store: st})
}

// eventually retries f until it succeeds or d passes.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
