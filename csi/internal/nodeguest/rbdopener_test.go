package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest"
)

// holderConfig is what the lock-holder child process reads on stdin.
type holderConfig struct {
	Cluster csi.Cluster
	Cred    csi.Credentials
	Vol     csi.VolumeID
}

// TestLockHolderProcess is not a test: TestRBDImageForNode runs the test
// binary again with NODEGUEST_LOCK_HOLDER=1 to get a process that opens
// an image exclusively, writes, says "held" and waits to be killed.
func TestLockHolderProcess(t *testing.T) {
	if os.Getenv("NODEGUEST_LOCK_HOLDER") != "1" {
		return
	}
	var hc holderConfig
	if err := json.NewDecoder(os.Stdin).Decode(&hc); err != nil {
		t.Fatal(err)
	}
	img, err := (&rbdOpener{}).OpenImage(context.Background(), hc.Cluster, hc.Cred, hc.Vol, csi.OpenImageOptions{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := img.WriteAtContext(context.Background(), []byte("holder"), 0); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("held\n")
	time.Sleep(time.Hour)
}

// TestRBDImageForNode checks the RBD opener of the guest plugin against a
// real cluster: I/O through the csi.NodeImage methods as rbd(8) sees it,
// the exclusive lock of single-writer volumes, errors the node maps to
// gRPC codes, Refresh after a resize by another client, and how long a
// restarted plugin waits for the lock of its SIGKILLed predecessor.
func TestRBDImageForNode(t *testing.T) {
	watchTimeout := "10"
	if v := os.Getenv("NODEGUEST_WATCH_TIMEOUT"); v != "" {
		watchTimeout = v // 30 is Ceph's default
	}
	cluster := radostest.New(t, radostest.Options{Conf: map[string]string{"osd_client_watch_timeout": watchTimeout}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := cluster.Rbd(ctx, "create", "--size", "64M", "--image-feature", "layering,exclusive-lock,object-map,fast-diff", "rbd/vol")
	require.NoError(t, err)
	conn, err := rados.Connect(ctx, rados.Config{MonHost: strings.Join(cluster.MonAddrs, ","), Key: cluster.AdminKey})
	require.NoError(t, err)
	pool, err := conn.LookupPool(ctx, "rbd")
	conn.Close()
	require.NoError(t, err)

	cl := csi.Cluster{ID: "c", Monitors: cluster.MonAddrs}
	admin := csi.Credentials{ID: "admin", Key: cluster.AdminKey}
	vol := csi.VolumeID{ClusterID: "c", Pool: pool, Image: "vol"}
	o := &rbdOpener{}

	start := time.Now()
	img, err := o.OpenImage(ctx, cl, admin, vol, csi.OpenImageOptions{Exclusive: true})
	require.NoError(t, err)
	t.Logf("open with the exclusive lock: %v", time.Since(start).Round(time.Millisecond))
	data := make([]byte, 1<<20)
	rand.Read(data)
	_, err = img.WriteAtContext(ctx, data, 4<<20)
	require.NoError(t, err)
	require.NoError(t, img.Flush(ctx))
	back := make([]byte, len(data))
	_, err = img.ReadAtContext(ctx, back, 4<<20)
	require.NoError(t, err)
	assert.Equal(t, data, back)
	require.NoError(t, img.Discard(ctx, 0, 1<<20))

	// Another client may take the lock (the controller resizing or
	// taking a snapshot); the writer takes it back at its next write.
	start = time.Now()
	other, err := o.OpenImage(ctx, cl, admin, vol, csi.OpenImageOptions{Exclusive: true})
	require.NoError(t, err)
	t.Logf("second exclusive open (lock handed over) in %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	_, err = img.WriteAtContext(ctx, data[:4096], 8<<20)
	require.NoError(t, err)
	t.Logf("write by the first opener (lock taken back) in %v", time.Since(start).Round(time.Millisecond))
	require.NoError(t, other.Close())
	// rbd(8) sees the bytes (a read-only export takes no lock).
	out := filepath.Join(t.TempDir(), "export")
	_, err = cluster.Rbd(ctx, "export", "rbd/vol", out)
	require.NoError(t, err)
	exported, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, data, exported[4<<20:5<<20])

	// Errors the node turns into gRPC codes.
	raw, err := base64.StdEncoding.DecodeString(cluster.AdminKey)
	require.NoError(t, err)
	raw[len(raw)-1] ^= 0xff // a well-formed key that is not admin's
	wrong := csi.Credentials{ID: "admin", Key: base64.StdEncoding.EncodeToString(raw)}
	_, err = o.OpenImage(ctx, cl, wrong, vol, csi.OpenImageOptions{})
	assert.ErrorIs(t, err, csi.ErrUnauthenticated, "%v", err)
	_, err = o.OpenImage(ctx, cl, admin, csi.VolumeID{ClusterID: "c", Pool: pool, Image: "nope"}, csi.OpenImageOptions{})
	assert.ErrorIs(t, err, csi.ErrNotFound)
	_, err = o.OpenImage(ctx, cl, admin, csi.VolumeID{ClusterID: "c", Pool: 4242, Image: "vol"}, csi.OpenImageOptions{})
	assert.ErrorIs(t, err, csi.ErrNotFound)

	// ControllerExpandVolume's resize reaches the open image.
	sizes := make(chan int64, 4)
	stop := img.(interface {
		NotifySize(func(int64)) func()
	}).NotifySize(func(s int64) { sizes <- s })
	_, err = cluster.Rbd(ctx, "resize", "--size", "128M", "rbd/vol")
	require.NoError(t, err)
	require.NoError(t, img.(interface{ Refresh(context.Context) error }).Refresh(ctx))
	assert.Equal(t, int64(128<<20), img.Size())
	select {
	case s := <-sizes:
		assert.Equal(t, int64(128<<20), s)
	case <-time.After(10 * time.Second):
		t.Error("no size notification")
	}
	stop()

	// A graceful handover: Close releases the lock at once.
	require.NoError(t, img.Close())
	start = time.Now()
	img, err = o.OpenImage(ctx, cl, admin, vol, csi.OpenImageOptions{Exclusive: true})
	require.NoError(t, err)
	t.Logf("exclusive open after a Close: %v", time.Since(start).Round(time.Millisecond))
	require.NoError(t, img.Close())

	// A crash: the lock holder is SIGKILLed; its watch lingers until the
	// OSD's watch timeout, then the lock is broken (owner blocklisted).
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "NODEGUEST_LOCK_HOLDER=1")
	cfg, _ := json.Marshal(holderConfig{Cluster: cl, Cred: admin, Vol: vol})
	cmd.Stdin = bytes.NewReader(cfg)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	held := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "held" {
				held <- nil
				io.Copy(io.Discard, stdout)
				return
			}
		}
		held <- errors.New("the holder ended without taking the lock")
	}()
	select {
	case err := <-held:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the holder does not take the lock")
	}
	require.NoError(t, cmd.Process.Kill())
	cmd.Wait()
	start = time.Now()
	img, err = o.OpenImage(ctx, cl, admin, vol, csi.OpenImageOptions{Exclusive: true})
	require.NoError(t, err)
	took := time.Since(start)
	t.Logf("exclusive open after the holder was SIGKILLed: %v (osd_client_watch_timeout %ss)", took.Round(time.Millisecond), watchTimeout)
	b := make([]byte, 6)
	_, err = img.ReadAtContext(ctx, b, 0)
	require.NoError(t, err)
	assert.Equal(t, "holder", string(b), "the dead holder's write is there")
	require.NoError(t, img.Close())
	bl, err := cluster.Ceph(ctx, "osd", "blocklist", "ls")
	require.NoError(t, err)
	t.Logf("blocklist after the takeover: %s", strings.TrimSpace(string(bl)))
}
