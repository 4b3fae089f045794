package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"
)

// The in-VM tests of the purerbd-csi binary on a real RBD cluster: csi's
// TestNodeRBDInVM runs this test binary in the guest with -guest and the
// cluster's coordinates. Without -guest (on the host) they have nothing
// to do.
var (
	inGuest    = flag.Bool("guest", false, "run the in-VM tests of the purerbd-csi binary (set by csi's TestNodeRBDInVM)")
	binaryPath = flag.String("binary", "/bin/purerbd-csi", "the purerbd-csi binary")
	confPath   = flag.String("cluster-config", configPath, "cluster config naming the cluster's monitors")
	secretsDir = flag.String("secrets-dir", "/etc/purerbd/secrets", "the plugin's own credentials (userID, userKey)")
	clusterArg = flag.String("cluster-id", clusterID, "cluster ID in the cluster config")
	poolArg    = flag.String("pool", "rbd", "pool name")
	poolIDArg  = flag.Int64("pool-id", 0, "pool ID")
)

// guestCluster is what the tests need to know of the cluster.
type guestCluster struct {
	id      string
	pool    string
	poolID  int64
	secrets map[string]string // the node-stage and controller secrets
}

// needGuest returns the cluster's coordinates, or nil outside the VM.
// In the VM it loads the file system modules (the plugin loads nbd.ko).
func needGuest(t *testing.T) *guestCluster {
	t.Helper()
	if !*inGuest {
		return nil
	}
	if *poolIDArg == 0 {
		t.Fatal("-pool-id is required with -guest")
	}
	if err := guestio.LoadModules("crc32c", "ext4", "xfs"); err != nil {
		t.Fatal(err)
	}
	// resize2fs finds the mount point of a device in /etc/mtab.
	os.Symlink("/proc/mounts", "/etc/mtab")
	user, err := os.ReadFile(filepath.Join(*secretsDir, "userID"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(*secretsDir, "userKey"))
	if err != nil {
		t.Fatal(err)
	}
	return &guestCluster{id: *clusterArg, pool: *poolArg, poolID: *poolIDArg,
		secrets: map[string]string{"userID": strings.TrimSpace(string(user)), "userKey": strings.TrimSpace(string(key))}}
}

// params are the StorageClass parameters of the tests' volumes.
func (g *guestCluster) params() map[string]string {
	return map[string]string{"clusterID": g.id, "pool": g.pool}
}

// newVolumeID returns the ID of a volume that does not exist.
func (g *guestCluster) newVolumeID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return csi.VolumeID{ClusterID: g.id, Pool: g.poolID, Image: "csi-vol-" + hex.EncodeToString(b)}.String()
}

// binaryPlugin is a running purerbd-csi process and a CSI client of it.
type binaryPlugin struct {
	name   string
	sock   string
	cmd    *exec.Cmd
	exited chan error
	conn   *grpc.ClientConn
	ident  csipb.IdentityClient
	ctrl   csipb.ControllerClient
	node   csipb.NodeClient
	// ready is how long it took from exec to its first Probe answer.
	ready time.Duration
}

// startBinary runs purerbd-csi with the cluster config and secrets
// directory, serving on /run/csi/<name>.sock, with args (roles, node
// ID, state directory) and waits until it answers a Probe. Its log lines
// go to the console prefixed with its name. It is stopped with SIGTERM
// at the end of the test, which must find it still running.
func startBinary(t *testing.T, name string, args ...string) *binaryPlugin {
	t.Helper()
	p := &binaryPlugin{name: name, sock: filepath.Join("/run/csi", name+".sock"), exited: make(chan error, 1)}
	args = append([]string{"--endpoint", "unix://" + p.sock, "--cluster-config", *confPath,
		"--secrets-dir", *secretsDir}, args...)
	p.cmd = exec.Command(*binaryPath, args...)
	logs, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = os.Stdout
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", *binaryPath, err)
	}
	cmd := p.cmd
	go func() {
		prefixLines(os.Stderr, logs, fmt.Sprintf("  [%s pid %d] ", name, cmd.Process.Pid))
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { p.stop(t) })

	p.conn, err = grpc.NewClient("unix://"+p.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p.ident = csipb.NewIdentityClient(p.conn)
	p.ctrl = csipb.NewControllerClient(p.conn)
	p.node = csipb.NewNodeClient(p.conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		r, err := p.ident.Probe(ctx, &csipb.ProbeRequest{})
		if err == nil && r.GetReady().GetValue() {
			break
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("%s exited before it served: %v", name, err)
		case <-ctx.Done():
			t.Fatalf("%s does not answer Probe: %v", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.ready = time.Since(start)
	t.Logf("%s (purerbd-csi %s) serves after %.2fs", name, strings.Join(args[8:], " "), p.ready.Seconds())
	return p
}

// stop sends SIGTERM and waits for a clean exit (once; later calls do
// nothing).
func (p *binaryPlugin) stop(t *testing.T) {
	if p.cmd == nil {
		return
	}
	cmd := p.cmd
	p.cmd = nil
	p.conn.Close()
	select {
	case err := <-p.exited:
		t.Errorf("%s had exited before the end of the test: %v", p.name, err)
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("%s: exit after SIGTERM: %v", p.name, err)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s did not stop within 60 s of SIGTERM", p.name)
	}
}

// mountVolume is a file system volume capability.
func mountVolume(fsType string, mode csipb.VolumeCapability_AccessMode_Mode) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: fsType}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
	}
}

// timed runs a step of a test and logs how long it took.
func timed(t *testing.T, name string, fn func() error) {
	t.Helper()
	start := time.Now()
	if err := fn(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("step %-60s %7.2fs", name, time.Since(start).Seconds())
}
