package rbdstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/rbdstore"
	"github.com/purerbd/purerbd/csi/sanitytest"
	"github.com/purerbd/purerbd/rados/radostest"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// plugin is purerbd-csi's controller on the real cluster, over a unix
// socket.
type plugin struct {
	sock  string
	drv   *csi.Driver
	ctrl  csipb.ControllerClient
	meta  csipb.SnapshotMetadataClient
	group csipb.GroupControllerClient
	ident csipb.IdentityClient
	logs  *lockedBuffer
	fail  func(step string) error
}

func startPlugin(t *testing.T) *plugin {
	t.Helper()
	radostest.SkipShort(t)
	dir, err := os.MkdirTemp("", "csi")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfgPath := filepath.Join(dir, "config.json")
	js := fmt.Sprintf(`[{"clusterID": %q, "monitors": [%q]}]`, cluster.FSID, strings.Join(cluster.MonAddrs, `","`))
	require.NoError(t, os.WriteFile(cfgPath, []byte(js), 0o600))
	p := &plugin{sock: filepath.Join(dir, "csi.sock"), logs: &lockedBuffer{}}
	store := rbdstore.New(rbdstore.Options{Logger: slog.New(slog.NewTextHandler(p.logs, nil))})
	t.Cleanup(func() { store.Close() })
	p.drv = csi.NewDriver(csi.Config{
		Version:           "test",
		ClusterConfigPath: cfgPath,
		Controller:        true,
		Store:             store,
		Credentials:       func(string) (csi.Credentials, bool) { return admin(), true },
		Logger:            slog.New(slog.NewTextHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		FaultHook: func(step string) error {
			if p.fail != nil {
				return p.fail(step)
			}
			return nil
		},
	})
	lis, err := net.Listen("unix", p.sock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.drv.Serve(ctx, lis) }()
	conn, err := grpc.NewClient("unix:"+p.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		cancel()
		assert.NoError(t, <-done)
		if t.Failed() {
			t.Logf("plugin logs:\n%s", p.logs.String())
		}
		assert.NotContains(t, p.logs.String(), cluster.AdminKey, "the key leaked into the logs")
	})
	p.ctrl = csipb.NewControllerClient(conn)
	p.meta = csipb.NewSnapshotMetadataClient(conn)
	p.group = csipb.NewGroupControllerClient(conn)
	p.ident = csipb.NewIdentityClient(conn)
	return p
}

func userSecrets() map[string]string {
	return map[string]string{"userID": "admin", "userKey": cluster.AdminKey}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestSanityOnCeph runs csi-sanity's Identity and Controller specs against
// purerbd-csi's controller on a real Ceph cluster.
func TestSanityOnCeph(t *testing.T) {
	p := startPlugin(t)
	pool := poolID(t)
	sanitytest.Run(t, sanitytest.Options{
		ControllerSocket: p.sock,
		DriverName:       csi.DefaultDriverName,
		Parameters:       map[string]string{"clusterID": cluster.FSID, "pool": cluster.Pool},
		Secrets:          userSecrets(),
		ValidVolumeID: func() string {
			return csi.VolumeID{ClusterID: cluster.FSID, Pool: pool, Image: "csi-vol-" + randomHex(16)}.String()
		},
		VolumeSize: 64 << 20,
		Title:      "purerbd CSI sanity (Ceph " + cluster.FSID + ")",
	})
	// Everything the suite made, it deleted; nothing may remain but what
	// other tests of this package left.
	assert.NotContains(t, rbdCLI(t, "ls", cluster.Pool), "csi-vol-")
}

func poolID(t *testing.T) int64 { return poolIDOf(t, cluster) }

// poolIDOf returns the id of cl's pool.
func poolIDOf(t *testing.T, cl *radostest.Cluster) int64 {
	t.Helper()
	st := rbdstore.New(rbdstore.Options{})
	defer st.Close()
	s, err := st.Session(testCtx(t), csi.Cluster{ID: cl.FSID, Monitors: cl.MonAddrs}, csi.Credentials{ID: "admin", Key: cl.AdminKey})
	require.NoError(t, err)
	id, err := s.LookupPool(testCtx(t), cl.Pool)
	require.NoError(t, err)
	return id
}

func (p *plugin) create(t *testing.T, name string, size int64, src *csipb.VolumeContentSource) (*csipb.Volume, error) {
	r, err := p.ctrl.CreateVolume(testCtx(t), &csipb.CreateVolumeRequest{
		Name:          name,
		CapacityRange: &csipb.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csipb.VolumeCapability{{
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4"}},
		}},
		Parameters:          map[string]string{"clusterID": cluster.FSID, "pool": cluster.Pool, "volumeNamePrefix": "drv-"},
		Secrets:             userSecrets(),
		VolumeContentSource: src,
	})
	return r.GetVolume(), err
}

func (p *plugin) snapshot(t *testing.T, name, vol string) (*csipb.Snapshot, error) {
	r, err := p.ctrl.CreateSnapshot(testCtx(t), &csipb.CreateSnapshotRequest{
		Name: name, SourceVolumeId: vol, Secrets: userSecrets(),
		Parameters: map[string]string{"snapshotNamePrefix": "drvsnap-"}})
	return r.GetSnapshot(), err
}

func (p *plugin) deleteVolume(t *testing.T, id string) error {
	_, err := p.ctrl.DeleteVolume(testCtx(t), &csipb.DeleteVolumeRequest{VolumeId: id, Secrets: userSecrets()})
	return err
}

func (p *plugin) deleteSnapshot(t *testing.T, id string) error {
	_, err := p.ctrl.DeleteSnapshot(testCtx(t), &csipb.DeleteSnapshotRequest{SnapshotId: id, Secrets: userSecrets()})
	return err
}

// images lists the images this file's tests make ("drv-" prefix),
// tombstones included, with their snapshots, as librbd sees them.
func images(t *testing.T) []string {
	var out []string
	for _, n := range strings.Fields(rbdCLI(t, "ls", cluster.Pool)) {
		if !strings.HasPrefix(n, "drv-") {
			continue
		}
		s := n
		for _, line := range strings.Split(rbdCLI(t, "snap", "ls", cluster.Pool+"/"+n), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 1 {
				s += "@" + f[1]
			}
		}
		out = append(out, s)
	}
	return out
}

func fromSnapshot(id string) *csipb.VolumeContentSource {
	return &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
		Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
}

func fromVolume(id string) *csipb.VolumeContentSource {
	return &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Volume{
		Volume: &csipb.VolumeContentSource_VolumeSource{VolumeId: id}}}
}

// TestLifecycleOnCeph runs a volume's whole controller-side life on the
// real cluster and checks every state with the rbd tool: snapshots
// outliving their volume, clones of snapshots and of volumes, tombstones
// and their cascade, and the ID a node would decode.
func TestLifecycleOnCeph(t *testing.T) {
	p := startPlugin(t)
	v, err := p.create(t, "life", 32<<20, nil)
	require.NoError(t, err)
	vid, err := csi.ParseVolumeID(v.GetVolumeId())
	require.NoError(t, err)
	assert.Equal(t, cluster.FSID, vid.ClusterID)
	i := info(t, cluster.Pool+"/"+vid.Image)
	assert.EqualValues(t, 32<<20, i.Size)
	assert.Equal(t, "life\n", rbdCLI(t, "image-meta", "get", cluster.Pool+"/"+vid.Image, "purerbd.csi.name"))

	again, err := p.create(t, "life", 32<<20, nil)
	require.NoError(t, err)
	assert.Equal(t, v.GetVolumeId(), again.GetVolumeId())

	s, err := p.snapshot(t, "life-snap", v.GetVolumeId())
	require.NoError(t, err)
	sid, err := csi.ParseSnapshotID(s.GetSnapshotId())
	require.NoError(t, err)
	assert.Equal(t, i.ID, sid.ImageID)

	clone, err := p.create(t, "life-clone", 64<<20, fromVolume(v.GetVolumeId()))
	require.NoError(t, err)
	assert.EqualValues(t, 64<<20, clone.GetCapacityBytes())
	restored, err := p.create(t, "life-restored", 0, fromSnapshot(s.GetSnapshotId()))
	require.NoError(t, err)
	rid, _ := csi.ParseVolumeID(restored.GetVolumeId())
	ri := info(t, cluster.Pool+"/"+rid.Image)
	require.NotNil(t, ri.Parent)
	assert.Equal(t, vid.Image, ri.Parent.Image)
	assert.Equal(t, sid.Snap, ri.Parent.Snapshot)

	// Expand.
	er, err := p.ctrl.ControllerExpandVolume(testCtx(t), &csipb.ControllerExpandVolumeRequest{
		VolumeId: v.GetVolumeId(), CapacityRange: &csipb.CapacityRange{RequiredBytes: 48 << 20}, Secrets: userSecrets()})
	require.NoError(t, err)
	assert.EqualValues(t, 48<<20, er.GetCapacityBytes())
	assert.EqualValues(t, 48<<20, info(t, cluster.Pool+"/"+vid.Image).Size)

	// Delete the origin: it has a snapshot and a clone's snapshot, so it
	// becomes a tombstone.
	require.NoError(t, p.deleteVolume(t, v.GetVolumeId()))
	require.NoError(t, p.deleteVolume(t, v.GetVolumeId()))
	names := strings.Join(images(t), " ")
	assert.Contains(t, names, vid.Image+"-deleted-"+i.ID)
	gs, err := p.ctrl.GetSnapshot(testCtx(t), &csipb.GetSnapshotRequest{SnapshotId: s.GetSnapshotId(), Secrets: userSecrets()})
	require.NoError(t, err)
	assert.Equal(t, v.GetVolumeId(), gs.GetSnapshot().GetSourceVolumeId())

	// Delete the snapshot: the restored clone still needs it.
	require.NoError(t, p.deleteSnapshot(t, s.GetSnapshotId()))
	require.NoError(t, p.deleteSnapshot(t, s.GetSnapshotId()))
	_, err = p.ctrl.GetSnapshot(testCtx(t), &csipb.GetSnapshotRequest{SnapshotId: s.GetSnapshotId(), Secrets: userSecrets()})
	assert.Equal(t, codes.NotFound, status.Code(err))

	// Delete the clones: the tombstones go with them.
	require.NoError(t, p.deleteVolume(t, restored.GetVolumeId()))
	require.NoError(t, p.deleteVolume(t, clone.GetVolumeId()))
	assert.Empty(t, images(t))
	require.NoError(t, p.drv.Sweep(testCtx(t)))
}

// TestFaultsOnCeph fails each step of creating a volume from a snapshot
// and of deleting a volume with clones once, on the real cluster, and
// checks the retry converges.
func TestFaultsOnCeph(t *testing.T) {
	p := startPlugin(t)
	base, err := p.create(t, "faults-base", 16<<20, nil)
	require.NoError(t, err)
	s, err := p.snapshot(t, "faults-snap", base.GetVolumeId())
	require.NoError(t, err)
	for _, step := range []string{"create-volume/create", "create-volume/resize", "create-volume/set-source", "create-volume/set-name"} {
		failed := false
		p.fail = func(st string) error {
			if st == step && !failed {
				failed = true
				return fmt.Errorf("injected")
			}
			return nil
		}
		name := "faults-" + strings.ReplaceAll(step, "/", "-")
		_, err := p.create(t, name, 32<<20, fromSnapshot(s.GetSnapshotId()))
		require.Equal(t, codes.Internal, status.Code(err), "%s: %v", step, err)
		v, err := p.create(t, name, 32<<20, fromSnapshot(s.GetSnapshotId()))
		require.NoError(t, err, step)
		assert.EqualValues(t, 32<<20, v.GetCapacityBytes())
		vid, _ := csi.ParseVolumeID(v.GetVolumeId())
		assert.Equal(t, name+"\n", rbdCLI(t, "image-meta", "get", cluster.Pool+"/"+vid.Image, "purerbd.csi.name"))
		p.fail = nil
		require.NoError(t, p.deleteVolume(t, v.GetVolumeId()))
	}
	require.NoError(t, p.deleteSnapshot(t, s.GetSnapshotId()))
	require.NoError(t, p.deleteVolume(t, base.GetVolumeId()))
	assert.Empty(t, images(t))
}

// TestInterruptedCreateOnCeph leaves what a plugin killed inside
// rbd.Create leaves (rbd_id.NAME written, no header) and checks that
// CreateVolume clears it and makes the image.
func TestInterruptedCreateOnCeph(t *testing.T) {
	p := startPlugin(t)
	sum := sha256.Sum256([]byte("interrupted"))
	name := "drv-" + hex.EncodeToString(sum[:])[:32]
	id := "deadbeef1234"
	var enc []byte
	enc = binary.LittleEndian.AppendUint32(enc, uint32(len(id)))
	enc = append(enc, id...)
	f := filepath.Join(t.TempDir(), "id")
	require.NoError(t, os.WriteFile(f, enc, 0o600))
	out, err := cluster.Rados(testCtx(t), "-p", cluster.Pool, "put", "rbd_id."+name, f)
	require.NoError(t, err, "%s", out)

	v, err := p.create(t, "interrupted", 4<<20, nil)
	require.NoError(t, err)
	vid, _ := csi.ParseVolumeID(v.GetVolumeId())
	assert.Equal(t, name, vid.Image)
	assert.EqualValues(t, 4<<20, info(t, cluster.Pool+"/"+name).Size)
	assert.Contains(t, p.logs.String(), "interrupted image creation")
	require.NoError(t, p.deleteVolume(t, v.GetVolumeId()))
	assert.Empty(t, images(t))
}
