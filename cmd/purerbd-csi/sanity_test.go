package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/sanitytest"
	"github.com/purerbd/purerbd/rados/radostest"
)

// TestSanityBinary runs csi-sanity's Identity and Controller specs
// against the purerbd-csi binary itself, run as the controller Deployment
// runs it (--controller, unix socket, cluster config file, plugin secrets
// directory), on a real Ceph cluster; the suite passes the credentials as
// CSI secrets from its secrets file. Afterwards neither rbd ls nor rados
// ls shows anything the suite made, and the key is in no log line.
func TestSanityBinary(t *testing.T) {
	cl := radostest.New(t, radostest.Options{})
	dir, err := os.MkdirTemp("", "csisanity")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "purerbd-csi")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	cfg := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`[{"clusterID": %q, "monitors": [%q]}]`,
		cl.FSID, strings.Join(cl.MonAddrs, `","`))), 0o600))
	secrets := filepath.Join(dir, "secrets")
	require.NoError(t, os.Mkdir(secrets, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(secrets, "userID"), []byte("admin"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(secrets, "userKey"), []byte(cl.AdminKey), 0o600))
	sock := filepath.Join(dir, "csi.sock")

	var logs bytes.Buffer
	cmd := exec.Command(bin, "--controller", "--endpoint=unix://"+sock, "--cluster-config="+cfg,
		"--secrets-dir="+secrets, "--log-level=debug", "--log-format=json")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("purerbd-csi output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "no socket after 20 s")
		time.Sleep(50 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool := poolIDOf(ctx, t, cl, cl.Pool)
	sanitytest.Run(t, sanitytest.Options{
		ControllerSocket: sock,
		DriverName:       csi.DefaultDriverName,
		Parameters:       map[string]string{"clusterID": cl.FSID, "pool": cl.Pool},
		Secrets:          map[string]string{"userID": "admin", "userKey": cl.AdminKey},
		ValidVolumeID: func() string {
			b := make([]byte, 16)
			rand.Read(b)
			return csi.VolumeID{ClusterID: cl.FSID, Pool: pool, Image: "csi-vol-" + hex.EncodeToString(b)}.String()
		},
		VolumeSize: 64 << 20,
		Title:      "purerbd-csi binary, csi-sanity (Ceph " + cl.FSID + ")",
	})

	// Everything the suite made, it deleted: no image, no image object.
	ls, err := cl.Rbd(ctx, "ls", cl.Pool)
	require.NoError(t, err, "%s", ls)
	assert.Empty(t, strings.TrimSpace(string(ls)), "images left behind")
	objs, err := cl.Rados(ctx, "-p", cl.Pool, "ls")
	require.NoError(t, err, "%s", objs)
	for _, o := range strings.Fields(string(objs)) {
		for _, prefix := range []string{"rbd_data.", "rbd_header.", "rbd_id.", "rbd_object_map."} {
			assert.False(t, strings.HasPrefix(o, prefix), "object %s left behind", o)
		}
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		stopped = true
		assert.NoError(t, err, "exit status after SIGTERM")
	case <-time.After(20 * time.Second):
		t.Fatal("purerbd-csi did not stop within 20 s of SIGTERM")
	}
	assert.NotContains(t, logs.String(), cl.AdminKey, "the key leaked into the logs")
}

// poolIDOf looks the pool's ID up with the ceph tool.
func poolIDOf(ctx context.Context, t *testing.T, cl *radostest.Cluster, name string) int64 {
	t.Helper()
	out, err := cl.Ceph(ctx, "osd", "pool", "ls", "detail", "--format", "json")
	require.NoError(t, err, "%s", out)
	var pools []struct {
		Name string `json:"pool_name"`
		ID   int64  `json:"pool_id"`
	}
	require.NoError(t, json.Unmarshal(out, &pools))
	for _, p := range pools {
		if p.Name == name {
			return p.ID
		}
	}
	t.Fatalf("no pool %s in %s", name, out)
	return 0
}
