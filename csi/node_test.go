package csi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/purerbd/purerbd/csi/internal/fileimage"
	"github.com/purerbd/purerbd/csi/internal/mount"
	"github.com/purerbd/purerbd/csi/internal/nodestate"
)

// fileOpener opens images as files dir/<pool>/<namespace>/<image>; the
// host tests use it for everything up to the kernel, which they never
// reach.
type fileOpener struct {
	dir    string
	opened []OpenImageOptions
}

type fileImage = fileimage.Image

func (o *fileOpener) OpenImage(ctx context.Context, c Cluster, cred Credentials, vol VolumeID, opts OpenImageOptions) (NodeImage, error) {
	o.opened = append(o.opened, opts)
	if cred.Key != "good-key" {
		return nil, fmt.Errorf("%w: bad key for %s", ErrUnauthenticated, cred)
	}
	p := filepath.Join(o.dir, fmt.Sprint(vol.Pool), vol.Namespace, vol.Image)
	if _, err := os.Stat(p); err != nil {
		return nil, fmt.Errorf("%w: image %s", ErrNotFound, vol.Image)
	}
	img, err := fileimage.Open(p, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	return img, nil
}

const testClusterID = "test-cluster"

func newTestNode(t *testing.T, opts ...func(*NodeConfig)) (*NodeServer, *fileOpener) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(conf, []byte(`[{"clusterID":"`+testClusterID+`","monitors":["10.0.0.1:3300"]}]`), 0o644))
	op := &fileOpener{dir: filepath.Join(dir, "images")}
	cfg := NodeConfig{
		NodeID:            "node-1",
		Topology:          map[string]string{"topology.purerbd.io/zone": "z1"},
		MaxVolumes:        8,
		ClusterConfigPath: conf,
		Opener:            op,
		StateDir:          filepath.Join(dir, "state"),
	}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := NewNodeServer(cfg)
	require.NoError(t, err)
	return n, op
}

func testVolumeID(image string) string {
	return VolumeID{ClusterID: testClusterID, Pool: 2, Image: image}.String()
}

// testRecord returns the node state record of a staged file system
// volume with one read-only publication.
func testRecord(id string) *nodestate.Record {
	return &nodestate.Record{
		VolumeID:    id,
		StagingPath: "/var/lib/kubelet/plugins/x/globalmount",
		Index:       3,
		Cookie:      id,
		Conns:       4,
		FsType:      "ext4",
		MountFlags:  nodestate.FlagsDigest([]string{"noatime"}),
		AccessMode:  "SINGLE_NODE_MULTI_WRITER",
		Exclusive:   true,
		Published:   map[string]nodestate.Publication{"/t/1": {ReadOnly: true}},
	}
}

func mountCap(mode csi.VolumeCapability_AccessMode_Mode, fs string, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs, MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func blockCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func TestNewNodeServerChecks(t *testing.T) {
	good := NodeConfig{NodeID: "n", Opener: &fileOpener{}, ClusterConfigPath: "/c", StateDir: t.TempDir()}
	for name, change := range map[string]func(*NodeConfig){
		"no node ID":          func(c *NodeConfig) { c.NodeID = "" },
		"no opener":           func(c *NodeConfig) { c.Opener = nil },
		"no cluster conf":     func(c *NodeConfig) { c.ClusterConfigPath = "" },
		"negative max":        func(c *NodeConfig) { c.MaxVolumes = -1 },
		"bad fs":              func(c *NodeConfig) { c.DefaultFsType = "btrfs" },
		"too many conns":      func(c *NodeConfig) { c.Conns = 65 },
		"tiny timeout":        func(c *NodeConfig) { c.IOTimeout = 1 },
		"no timeout, 4 conns": func(c *NodeConfig) { c.Conns = 4 },
		"floor, no timeout":   func(c *NodeConfig) { c.MinIOTimeout = time.Second },
		"relative state":      func(c *NodeConfig) { c.StateDir = "run/x" },
		"unwritable state":    func(c *NodeConfig) { c.StateDir = "/proc/purerbd" },
	} {
		cfg := good
		change(&cfg)
		_, err := NewNodeServer(cfg)
		assert.Error(t, err, name)
	}
	n, err := NewNodeServer(good)
	require.NoError(t, err)
	assert.Equal(t, DefaultNodeConns, n.cfg.Conns)
	assert.Equal(t, DefaultIOTimeout, n.cfg.IOTimeout)
	assert.Equal(t, DefaultReattachTimeout, n.cfg.ReattachTimeout)
	assert.Equal(t, DefaultResendInterval, n.cfg.ResendInterval)
	// a timeout allows more connections, and is fixed unless given a floor
	cfg := good
	cfg.IOTimeout, cfg.Conns = 20*time.Second, 4
	n, err = NewNodeServer(cfg)
	require.NoError(t, err)
	assert.Equal(t, 20*time.Second, n.cfg.MinIOTimeout)
	assert.Equal(t, "ext4", n.cfg.DefaultFsType)
}

func TestNodeInfoAndCapabilities(t *testing.T) {
	n, _ := newTestNode(t)
	ctx := context.Background()
	info, err := n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, "node-1", info.GetNodeId())
	assert.Equal(t, int64(8), info.GetMaxVolumesPerNode())
	assert.Equal(t, map[string]string{"topology.purerbd.io/zone": "z1"}, info.GetAccessibleTopology().GetSegments())
	// without topology the node still says where it is: nowhere in
	// particular (csi-sanity checks it, the plugin advertising
	// accessibility constraints)
	n.cfg.Topology = nil
	info, err = n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	require.NoError(t, err)
	require.NotNil(t, info.GetAccessibleTopology())
	assert.Empty(t, info.GetAccessibleTopology().GetSegments())

	caps, err := n.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	require.NoError(t, err)
	var got []csi.NodeServiceCapability_RPC_Type
	for _, c := range caps.GetCapabilities() {
		got = append(got, c.GetRpc().GetType())
	}
	assert.ElementsMatch(t, []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
	}, got)
}

func TestParseNodeCapability(t *testing.T) {
	for _, c := range []struct {
		c                           *csi.VolumeCapability
		ro, exclusive, multi, block bool
		fs                          string
	}{
		{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, ""), false, true, false, false, "ext4"},
		{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, "xfs"), false, true, false, false, "xfs"},
		{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, "ext4"), false, true, true, false, "ext4"},
		{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, "ext4"), true, false, false, false, "ext4"},
		{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, "ext4"), true, false, true, false, "ext4"},
		{blockCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER), false, false, true, true, ""},
		{blockCap(csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER), false, false, true, true, ""},
		{blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), false, true, false, true, ""},
	} {
		nc, err := parseNodeCapability(c.c, nil, "ext4")
		require.NoError(t, err, "%v", c.c)
		assert.Equal(t, []any{c.ro, c.exclusive, c.multi, c.block, c.fs},
			[]any{nc.readOnly, nc.exclusive, nc.multiTarget, nc.block, nc.fsType}, "%v", c.c)
	}
	// The volume context's fsType and mkfsOptions apply when the
	// capability names none.
	nc, err := parseNodeCapability(mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, ""),
		map[string]string{"fsType": "xfs", "mkfsOptions": "-K -m crc=1"}, "ext4")
	require.NoError(t, err)
	assert.Equal(t, "xfs", nc.fsType)
	assert.Equal(t, "-K -m crc=1", nc.mkfsOptions)

	// Mount flags are kept only as a digest in the record.
	a, _ := parseNodeCapability(mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "ext4", "noatime"), nil, "ext4")
	b, _ := parseNodeCapability(mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "ext4"), nil, "ext4")
	rec := &nodestate.Record{FsType: "ext4", MountFlags: a.flags, AccessMode: a.mode.String()}
	assert.Empty(t, a.stagedAs(rec))
	assert.Contains(t, b.stagedAs(rec), "mount flags")
	c, _ := parseNodeCapability(mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, "ext4", "noatime"), nil, "ext4")
	assert.Contains(t, c.stagedAs(rec), "access mode")
	d, _ := parseNodeCapability(blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), nil, "ext4")
	assert.Contains(t, d.stagedAs(rec), "file system")
	e, _ := parseNodeCapability(mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "xfs", "noatime"), nil, "ext4")
	assert.Contains(t, e.stagedAs(rec), "ext4")
}

func code(err error) codes.Code { return status.Code(err) }

// TestNodeArgumentValidation sends every node call malformed requests;
// each fails before touching the kernel, with the code the spec names.
func TestNodeArgumentValidation(t *testing.T) {
	n, op := newTestNode(t)
	ctx := context.Background()
	vol := testVolumeID("csi-vol-1")
	staging := filepath.Join(t.TempDir(), "staging")
	rwo := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "ext4")
	secrets := map[string]string{"userID": "node", "userKey": "good-key"}
	stage := func(mod func(*csi.NodeStageVolumeRequest)) error {
		// A fresh capability each time: a case that edits it must not leak
		// into the cases after it, whatever order the map yields them in.
		r := &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: proto.Clone(rwo).(*csi.VolumeCapability), Secrets: secrets}
		mod(r)
		_, err := n.NodeStageVolume(ctx, r)
		return err
	}
	for name, c := range map[string]struct {
		mod  func(*csi.NodeStageVolumeRequest)
		want codes.Code
	}{
		"no volume ID":     {func(r *csi.NodeStageVolumeRequest) { r.VolumeId = "" }, codes.InvalidArgument},
		"no staging path":  {func(r *csi.NodeStageVolumeRequest) { r.StagingTargetPath = "" }, codes.InvalidArgument},
		"relative staging": {func(r *csi.NodeStageVolumeRequest) { r.StagingTargetPath = "a/b" }, codes.InvalidArgument},
		"unclean staging":  {func(r *csi.NodeStageVolumeRequest) { r.StagingTargetPath = "/a/../b" }, codes.InvalidArgument},
		"no capability":    {func(r *csi.NodeStageVolumeRequest) { r.VolumeCapability = nil }, codes.InvalidArgument},
		"no access type": {func(r *csi.NodeStageVolumeRequest) {
			r.VolumeCapability = &csi.VolumeCapability{AccessMode: rwo.AccessMode}
		}, codes.InvalidArgument},
		"no access mode": {func(r *csi.NodeStageVolumeRequest) {
			r.VolumeCapability = &csi.VolumeCapability{AccessType: rwo.AccessType}
		}, codes.InvalidArgument},
		"RWX file system": {func(r *csi.NodeStageVolumeRequest) {
			r.VolumeCapability = mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, "ext4")
		}, codes.FailedPrecondition},
		"btrfs": {func(r *csi.NodeStageVolumeRequest) {
			r.VolumeCapability = mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "btrfs")
		}, codes.FailedPrecondition},
		"bind flag": {func(r *csi.NodeStageVolumeRequest) {
			r.VolumeCapability = mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "ext4", "bind")
		}, codes.InvalidArgument},
		"bad mount group": {func(r *csi.NodeStageVolumeRequest) { r.VolumeCapability.GetMount().VolumeMountGroup = "wheel" }, codes.InvalidArgument},
		"not a volume ID": {func(r *csi.NodeStageVolumeRequest) { r.VolumeId = "pvc-123" }, codes.NotFound},
		"unknown cluster": {func(r *csi.NodeStageVolumeRequest) {
			r.VolumeId = VolumeID{ClusterID: "other", Pool: 1, Image: "i"}.String()
		}, codes.NotFound},
		"no secrets":   {func(r *csi.NodeStageVolumeRequest) { r.Secrets = nil }, codes.InvalidArgument},
		"half secrets": {func(r *csi.NodeStageVolumeRequest) { r.Secrets = map[string]string{"userID": "x"} }, codes.InvalidArgument},
		"wrong key": {func(r *csi.NodeStageVolumeRequest) {
			r.Secrets = map[string]string{"userID": "x", "userKey": "bad-key"}
		}, codes.Unauthenticated},
		"image does not exist": {func(r *csi.NodeStageVolumeRequest) {}, codes.NotFound},
		"unknown nbd map option": {func(r *csi.NodeStageVolumeRequest) {
			r.VolumeContext = map[string]string{"mapOptions": "nbd:io-timeout=60,notrim"}
		}, codes.InvalidArgument},
	} {
		err := stage(c.mod)
		assert.Equal(t, c.want, code(err), "%s: %v", name, err)
		if name == "wrong key" {
			assert.NotContains(t, err.Error(), "bad-key", "no key in errors")
		}
	}
	// Single-node writers keep the image's lock.
	require.NotEmpty(t, op.opened)
	assert.Equal(t, OpenImageOptions{Exclusive: true, Node: n.cfg.NodeID}, op.opened[len(op.opened)-1], "with the node ID: a node claims its single writers")
	assert.Empty(t, n.vols, "nothing staged")
	left, _ := filepath.Glob(filepath.Join(n.cfg.StateDir, "*"))
	assert.Empty(t, left, "no state left by failed stages")

	target := filepath.Join(t.TempDir(), "target")
	pub := func(mod func(*csi.NodePublishVolumeRequest)) error {
		r := &csi.NodePublishVolumeRequest{VolumeId: vol, StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo}
		mod(r)
		_, err := n.NodePublishVolume(ctx, r)
		return err
	}
	for name, c := range map[string]struct {
		mod  func(*csi.NodePublishVolumeRequest)
		want codes.Code
	}{
		"no volume ID":    {func(r *csi.NodePublishVolumeRequest) { r.VolumeId = "" }, codes.InvalidArgument},
		"no target":       {func(r *csi.NodePublishVolumeRequest) { r.TargetPath = "" }, codes.InvalidArgument},
		"no staging path": {func(r *csi.NodePublishVolumeRequest) { r.StagingTargetPath = "" }, codes.FailedPrecondition},
		"same paths":      {func(r *csi.NodePublishVolumeRequest) { r.TargetPath = staging }, codes.InvalidArgument},
		"no capability":   {func(r *csi.NodePublishVolumeRequest) { r.VolumeCapability = nil }, codes.InvalidArgument},
		"not staged":      {func(r *csi.NodePublishVolumeRequest) {}, codes.NotFound},
	} {
		err := pub(c.mod)
		assert.Equal(t, c.want, code(err), "publish %s: %v", name, err)
	}

	// Undoing what was never done is fine, twice.
	for range 2 {
		_, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: target})
		assert.NoError(t, err)
		_, err = n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging})
		assert.NoError(t, err)
	}
	_, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{TargetPath: target})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{StagingTargetPath: staging})
	assert.Equal(t, codes.InvalidArgument, code(err))

	_, err = n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumePath: staging})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol, VolumePath: staging})
	assert.Equal(t, codes.NotFound, code(err))
	_, err = n.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = n.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: vol})
	assert.Equal(t, codes.NotFound, code(err))
	_, err = n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: vol, VolumePath: staging,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2, LimitBytes: 1}})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: vol})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: vol, VolumePath: staging})
	assert.Equal(t, codes.NotFound, code(err))
}

func TestNodeOperationsExclusive(t *testing.T) {
	n, _ := newTestNode(t)
	unlock, err := n.lockVolume("v", "/a")
	require.NoError(t, err)
	_, err = n.lockVolume("v")
	assert.Equal(t, codes.Aborted, code(err))
	_, err = n.lockVolume("w", "/a")
	assert.Equal(t, codes.Aborted, code(err), "the same path for another volume")
	u2, err := n.lockVolume("w", "/b")
	require.NoError(t, err)
	u2()
	unlock()
	u3, err := n.lockVolume("v", "/a")
	require.NoError(t, err)
	u3()

	require.NoError(t, n.Close(context.Background()))
	_, err = n.lockVolume("v")
	assert.Equal(t, codes.Unavailable, code(err), "after Close")
}

// TestNodeMaxVolumes refuses a stage over the limit before doing anything.
func TestNodeMaxVolumes(t *testing.T) {
	n, op := newTestNode(t)
	n.cfg.MaxVolumes = 1
	n.vols["other"] = &nodeVolume{rec: testRecord("other")}
	_, err := n.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
		VolumeId: testVolumeID("v"), StagingTargetPath: filepath.Join(t.TempDir(), "s"),
		VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, ""),
		Secrets:          map[string]string{"userID": "u", "userKey": "good-key"},
	})
	assert.Equal(t, codes.ResourceExhausted, code(err))
	assert.Empty(t, op.opened)
}

// TestNodeSymlinkedPaths sends node calls whose paths are symbolic links
// to mount points: NodeUnpublish unmounts what the link leads to, and
// NodeStage sees that something is mounted at its staging path rather
// than stacking a mount on it. It needs CAP_SYS_ADMIN.
func TestNodeSymlinkedPaths(t *testing.T) {
	ctx := context.Background()
	n, _ := newTestNode(t)
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real"), filepath.Join(dir, "link")
	require.NoError(t, os.Mkdir(real, 0o755))
	require.NoError(t, os.Symlink(real, link))
	mounted := func() bool {
		tab, err := mount.ReadTable()
		require.NoError(t, err)
		_, ok := tab.At(real)
		return ok
	}
	require.NoError(t, unix.Mount("tmpfs", real, "tmpfs", 0, "size=1m"), "mounting a tmpfs needs CAP_SYS_ADMIN")
	t.Cleanup(func() { mount.UnmountAll(real) })

	_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: testVolumeID("v"), StagingTargetPath: link,
		VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, ""),
		Secrets:          map[string]string{"userID": "u", "userKey": "good-key"},
	})
	assert.Equal(t, codes.AlreadyExists, code(err), "%v", err)

	_, err = n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: testVolumeID("v"), TargetPath: link})
	require.NoError(t, err)
	assert.False(t, mounted(), "NodeUnpublish through a link unmounts")
}
