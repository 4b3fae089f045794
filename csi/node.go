package csi

// The Node service: RBD volumes served by this very process to the
// kernel over NBD, and mounted.
//
// NodeStageVolume opens the image (ImageOpener), attaches it to the kernel
// as /dev/nbdN through package nbd/kernel with several connections and the
// volume ID as the backend cookie, makes a file system if the device is
// blank and mounts it at the staging path (block volumes: nothing is
// mounted). NodePublishVolume bind-mounts the staging path, or the device
// node, at the target. NodeUnstageVolume unmounts, disconnects the device
// and closes the image.
//
// The plugin may die or be upgraded while volumes are in use. The devices
// and mounts belong to the kernel and stay; the kernel holds their I/O
// for up to the dead connection timeout (NodeConfig.ReattachTimeout). On
// start, Start reads the node state (package csi/internal/nodestate),
// reopens each image and hands the kernel fresh connections for the same
// device, found by its cookie (kernel.Reattach): I/O that was waiting
// resumes and nothing is lost. Close, on an orderly exit, releases the
// devices for the next process the same way. A device whose connections
// all die while the plugin runs (request timeouts against a slow
// cluster) is reattached by a watchdog.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi/internal/fstools"
	"github.com/purerbd/purerbd/csi/internal/nodestate"
	"github.com/purerbd/purerbd/internal/bufpool"
	"github.com/purerbd/purerbd/nbd/kernel"
)

// Defaults of NodeConfig.
const (
	// DefaultNodeConns is one connection per device: the kernel keeps
	// requests without a timeout only there (see DefaultIOTimeout).
	DefaultNodeConns = 1
	// DefaultIOTimeout is no NBD request timeout: a request waits for
	// the plugin however long Ceph takes (a slow OSD is never an I/O
	// error, and no connection is ever dropped while the plugin lives),
	// and the requests in flight when the plugin died are resent at the
	// kernel's first look after its successor's reattach, so a restart
	// stalls I/O for the restart plus at most about a second
	// (kernel.AttachConfig.ResendInterval). A positive timeout brings
	// back the kernel's timeouts, fixed or adaptive (MinIOTimeout).
	DefaultIOTimeout time.Duration = 0
	// DefaultResendInterval is the age from which the kernel looks at a
	// request in flight, on the block layer's timer, which mostly fires
	// at whole seconds, and it resends a request the dead plugin held at
	// the first look after the reattach: a short interval lets that be
	// the next whole second after the reattach rather than one more.
	// Requests of a live plugin older than it when the kernel looks are
	// logged by the kernel ("Possible stuck request") and left alone, so
	// it stays well above a healthy cluster's latency.
	DefaultResendInterval = 250 * time.Millisecond
	// DefaultMinIOTimeout, zero, makes a positive IOTimeout fixed; a
	// lower floor makes it adapt (opt-in: dropping and replacing
	// connections under a stalled backend races in the kernel's receive
	// worker; see kernel.AttachConfig.ResendInterval).
	DefaultMinIOTimeout    time.Duration = 0
	DefaultReattachTimeout               = 5 * time.Minute
	DefaultFsType                        = "ext4"
)

// DefaultStateDir is where the node keeps its state unless configured
// otherwise: under /run, a tmpfs, so that the state vanishes on reboot
// together with the devices and mounts it describes.
const DefaultStateDir = "/run/purerbd-csi"

// Tools says where the node's file system programs (mkfs.ext4, mkfs.xfs,
// resize2fs, xfs_growfs) come from: Dir, a directory holding them, run
// as they are; else Root, a root file system (the host's, mounted into
// the container) holding them in its sbin or bin directories, run
// chroot'ed into it; else the plugin's own $PATH and sbin directories.
// Timeout bounds one run (default 10 minutes).
type Tools = fstools.Runner

// nodeReleaseTimeout bounds releasing a volume that a call staged or
// took over after Close began.
const nodeReleaseTimeout = 15 * time.Second

// NodeConfig configures the node service.
type NodeConfig struct {
	// NodeID identifies this node (the Kubernetes node name).
	NodeID string
	// KMSConfigPath and Secrets find the passphrases of encrypted
	// volumes made under a KMS, as in Config.
	KMSConfigPath string
	Secrets       SecretReader
	// Topology is this node's topology segments, reported by NodeGetInfo
	// (typically read from node labels by the command line).
	Topology map[string]string
	// MaxVolumes is the most volumes this node stages at once (0: no
	// limit reported, none enforced).
	MaxVolumes int64
	// ClusterConfigPath is the cluster configuration file (monitors per
	// cluster ID), read on every stage and reattach.
	ClusterConfigPath string
	// Opener opens images; required.
	Opener ImageOpener
	// Store, optional, reads ceph-csi's journal and looks pools up by
	// name: needed to stage ceph-csi volumes and static volumes.
	Store ImageStore
	// Credentials are the plugin's own, used when a request carries no
	// secrets and, after a restart, when no secret was kept for a volume.
	Credentials CredentialSource
	// StateDir holds the node state (DefaultStateDir if empty); it should
	// be on a tmpfs, see package csi/internal/nodestate.
	StateDir string
	// Tools says where mkfs, resize2fs and xfs_growfs come from.
	Tools Tools
	// DefaultFsType is used when neither the capability nor the volume
	// context names a file system (default ext4).
	DefaultFsType string
	// Conns is the number of NBD connections per device, one kernel
	// queue each (default DefaultNodeConns).
	Conns int
	// IOTimeout is the kernel's NBD request timeout, 0 (the default)
	// for none: then each device has one connection (Conns must be 1)
	// and the requests in flight when the plugin died are resent every
	// ResendInterval (default DefaultResendInterval) once its successor
	// reattached. With a timeout, a request that was in flight when the
	// plugin died is resent only after its timeout, which so bounds the
	// stall of a restart; MinIOTimeout is then its floor (default: equal
	// to IOTimeout, fixed; a lower one makes it adapt between the two,
	// see kernel.AttachConfig.MinTimeout).
	IOTimeout      time.Duration
	MinIOTimeout   time.Duration
	ResendInterval time.Duration
	// ReattachTimeout is the kernel's dead connection timeout (default 5
	// minutes): how long I/O waits for a restarted plugin before it fails.
	ReattachTimeout time.Duration
	// TookOver, when set, is called at the end of Start with the number
	// of staged volumes it found and how many of them it could not take
	// over (the plugin then lets its predecessor record go).
	TookOver func(volumes, failed int)
	// DeviceType is the kernel device volumes are served through unless
	// their class names one (deviceType): DeviceAuto (the default: ublk
	// where the kernel offers all the node needs of it, else NBD),
	// DeviceNBD or DeviceUblk. Conns is a ublk device's queue count.
	DeviceType string
	// Module says how to load nbd.ko (and ublk_drv: its directories).
	Module kernel.ModuleConfig
	// Logger receives structured logs; slog.Default() if nil.
	Logger *slog.Logger
	// Metrics, when set, receive the staged volumes' metrics
	// (NewMetrics; the same as Config.Metrics).
	Metrics *Metrics
}

// NodeServer is the CSI Node service. Create it with NewNodeServer, call
// Start before serving and Close when the plugin exits.
type NodeServer struct {
	csi.UnimplementedNodeServer

	cfg   NodeConfig
	log   *slog.Logger
	state *nodestate.Store
	ops   *inFlight // one operation per volume and per path at a time

	mu   sync.Mutex
	vols map[string]*nodeVolume // staged volumes by volume ID
	// staging counts the NodeStage calls between their volume limit
	// check and the end of their staging: they hold a place under
	// MaxVolumes as the volumes in vols do.
	staging int64
	// closed is set by Close; calls that start afterwards are refused.
	closed bool
	// calls counts the calls holding a volume's operation lock, which
	// Close waits for; idle is closed when it falls to zero while
	// closed is set.
	calls    int
	idle     chan struct{}
	warnings []string // what the kernel withholds (node_support.go)
	// ublk is what the kernel's ublk driver offers, probed by Start
	// unless the node serves NBD only
	ublk ublkSupport
	// unlocks lets one encrypted volume's LUKS format or unlock run at
	// a time (VolumeKeys.Unlocks): a node staging many volumes at once
	// holds one KDF's memory, not one per volume
	unlocks chan struct{}
	// buffers lends every volume's device (NBD server or ublk queues)
	// its request buffers: volumes written one after another reuse the
	// same buffers instead of each growing its own
	buffers bufpool.Pool
}

// NewNodeServer checks cfg and returns a node service; nothing touches
// the kernel until Start.
func NewNodeServer(cfg NodeConfig) (*NodeServer, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("csi node: no node ID")
	}
	if cfg.Opener == nil {
		return nil, errors.New("csi node: no image opener")
	}
	if cfg.ClusterConfigPath == "" {
		return nil, errors.New("csi node: no cluster config path")
	}
	if cfg.MaxVolumes < 0 {
		return nil, errors.New("csi node: negative volume limit")
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.DefaultFsType == "" {
		cfg.DefaultFsType = DefaultFsType
	}
	if cfg.DeviceType == "" {
		cfg.DeviceType = DefaultDeviceType
	}
	if err := checkDeviceType(cfg.DeviceType); err != nil {
		return nil, fmt.Errorf("csi node: %w", err)
	}
	if err := checkFsType(cfg.DefaultFsType); err != nil {
		return nil, fmt.Errorf("csi node: default %s", errorMessage(err))
	}
	if cfg.Conns == 0 {
		cfg.Conns = DefaultNodeConns
	}
	if cfg.Conns < 1 || cfg.Conns > 64 {
		return nil, fmt.Errorf("csi node: %d NBD connections per device (1 to 64)", cfg.Conns)
	}
	if cfg.ReattachTimeout == 0 {
		cfg.ReattachTimeout = DefaultReattachTimeout
	}
	if cfg.ResendInterval == 0 {
		cfg.ResendInterval = DefaultResendInterval
	}
	if cfg.IOTimeout < 0 || cfg.MinIOTimeout < 0 || cfg.ResendInterval < 0 {
		return nil, errors.New("csi node: negative NBD timeouts")
	}
	if cfg.IOTimeout == 0 {
		if cfg.Conns > 1 {
			return nil, fmt.Errorf("csi node: no NBD request timeout (the default) needs one connection per device, not %d: "+
				"the kernel drops connections on timeouts otherwise; give a request timeout with more connections", cfg.Conns)
		}
		if cfg.MinIOTimeout > 0 {
			return nil, errors.New("csi node: a minimum NBD request timeout needs a request timeout")
		}
	} else if cfg.MinIOTimeout == 0 {
		cfg.MinIOTimeout = cfg.IOTimeout
	}
	if (cfg.IOTimeout > 0 && (cfg.IOTimeout < time.Second || cfg.MinIOTimeout < time.Second)) || cfg.ReattachTimeout < time.Second {
		return nil, errors.New("csi node: NBD timeouts under a second")
	}
	if cfg.MinIOTimeout > cfg.IOTimeout {
		return nil, fmt.Errorf("csi node: minimum NBD request timeout %v above the timeout %v", cfg.MinIOTimeout, cfg.IOTimeout)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st, err := nodestate.Open(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("csi node: %w", err)
	}
	n := &NodeServer{
		cfg:   cfg,
		log:   cfg.Logger.With("service", "node"),
		state: st,
		ops:   newInFlight(),
		vols:  map[string]*nodeVolume{},
		// one at a time: a KDF keeps the CPU it has busy for its
		// seconds, so running two at once would not finish them sooner
		unlocks: make(chan struct{}, 1),
	}
	if cfg.Metrics != nil {
		cfg.Metrics.vols.state.setSource(n.volumeStatuses)
	}
	if !st.InMemory() {
		n.log.Warn("the node state directory is not a tmpfs: no credentials are kept there, so after a restart volumes wait for the plugin's own credentials or a call with secrets",
			"dir", cfg.StateDir)
	}
	return n, nil
}

// Start loads nbd.ko and takes over the volumes a previous process
// staged: it reopens their images and reattaches their devices. A volume
// that cannot be taken over is kept, reported unhealthy, retried when a
// call brings secrets, and can be unstaged. Start fails only when the
// node cannot work at all.
func (n *NodeServer) Start(ctx context.Context) error {
	if err := kernel.LoadModule(ctx, n.cfg.Module); err != nil {
		return fmt.Errorf("csi node: %w", err)
	}
	n.checkKernel(ctx)
	recs, bad, err := n.state.LoadAll()
	if err != nil {
		return fmt.Errorf("csi node: reading the node state: %w", err)
	}
	if err := n.checkUblk(ctx, recs); err != nil {
		return fmt.Errorf("csi node: %w", err)
	}
	for f, err := range bad {
		n.log.Error("unreadable node state file left alone", "file", f, "error", err.Error())
	}
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for _, r := range recs {
		v := &nodeVolume{rec: r}
		n.mu.Lock()
		n.vols[r.VolumeID] = v
		n.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.recover(ctx, v, nil); err != nil {
				failed.Add(1)
				n.log.Error("taking over a staged volume failed", "volumeID", r.VolumeID, "error", errorMessage(err))
			}
		}()
	}
	wg.Wait()
	if len(recs) > 0 {
		n.log.Info("staged volumes taken over", "volumes", len(recs), "duration", time.Since(start).Round(time.Millisecond))
	}
	if n.cfg.TookOver != nil {
		n.cfg.TookOver(len(recs)+len(bad), int(failed.Load())+len(bad))
	}
	return nil
}

// Close hands every device over for the next plugin process: it stops
// serving each one once its connection is idle (the kernel holds new I/O
// meanwhile) and closes the images, releasing their locks. The node
// state stays, and so do the devices and mounts: staged volumes outlive
// the process. Calls that start after Close began fail with
// UNAVAILABLE. Calls already running are waited for, up to half of the
// time ctx leaves, while every device is still served; then the
// devices are released. A stage that completes after that releases its
// own volume (addStaged), so no volume is left served by a process that
// is going away.
func (n *NodeServer) Close(ctx context.Context) error {
	n.mu.Lock()
	n.closed = true
	if n.idle == nil {
		n.idle = make(chan struct{})
		if n.calls == 0 {
			close(n.idle)
		}
	}
	idle := n.idle
	n.mu.Unlock()
	wctx, cancel := drainContext(ctx)
	select {
	case <-idle:
	case <-wctx.Done():
		n.mu.Lock()
		running := n.calls
		n.mu.Unlock()
		n.log.Warn("closing with calls still running: volumes they stage are released when they end", "calls", running)
	}
	cancel()
	n.mu.Lock()
	vols := make([]*nodeVolume, 0, len(n.vols))
	for _, v := range n.vols {
		vols = append(vols, v)
	}
	n.mu.Unlock()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, v := range vols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.release(ctx, v); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// drainContext bounds Close's wait for running calls to half of the
// time ctx leaves, keeping the rest for releasing the devices.
func drainContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithTimeout(ctx, time.Until(d)/2)
	}
	return context.WithCancel(ctx)
}

// lockVolume serialises operations on one volume; a second one at the
// same time is refused with ABORTED, and every one after Close began
// with UNAVAILABLE. Close waits for the calls holding a lock.
func (n *NodeServer) lockVolume(id string, paths ...string) (func(), error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "the node service is shutting down")
	}
	n.calls++
	n.mu.Unlock()
	keys := []string{"volume " + id}
	for _, p := range paths {
		if p != "" {
			keys = append(keys, "path "+p)
		}
	}
	unlock, err := n.ops.lock(keys...)
	if err != nil {
		n.callDone()
		return nil, err
	}
	return func() { unlock(); n.callDone() }, nil
}

// callDone ends a call counted by lockVolume.
func (n *NodeServer) callDone() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls--
	if n.calls == 0 && n.idle != nil {
		close(n.idle)
	}
}

// stageSlot is a place under MaxVolumes held by a NodeStage while it
// stages; addStaged turns it into the staged volume, free gives it back.
type stageSlot struct {
	n    *NodeServer
	used bool
}

// reserveSlot checks the volume limit and holds a place under it, in
// one step, so that concurrent stages cannot all pass the check.
func (n *NodeServer) reserveSlot() (*stageSlot, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	count := int64(len(n.vols)) + n.staging
	if n.cfg.MaxVolumes > 0 && count >= n.cfg.MaxVolumes {
		return nil, status.Errorf(codes.ResourceExhausted, "this node already has %d volumes staged or being staged, its limit", count)
	}
	n.staging++
	return &stageSlot{n: n}, nil
}

// free gives the place back unless a staged volume took it.
func (s *stageSlot) free() {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if !s.used {
		s.used = true
		s.n.staging--
	}
}

// volume returns the staged volume with the given ID, or nil.
func (n *NodeServer) volume(id string) *nodeVolume {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.vols[id]
}

// cluster finds the cluster of a volume.
func (n *NodeServer) cluster(id string) (Cluster, error) {
	cs, err := LoadClusters(n.cfg.ClusterConfigPath)
	if err != nil {
		return Cluster{}, status.Error(codes.FailedPrecondition, err.Error())
	}
	c, ok := cs.Find(id)
	if !ok {
		return Cluster{}, status.Errorf(codes.NotFound, "cluster %q of the volume is not in the cluster config", id)
	}
	return c, nil
}

// credentials picks the request's secrets, else the plugin's own
// credentials; ok is false when there are neither.
func (n *NodeServer) credentials(secrets map[string]string, clusterID string) (cred Credentials, ok bool, err error) {
	id, key := secrets[secretUserID], secrets[secretUserKey]
	switch {
	case id != "" && key != "":
		return Credentials{ID: strings.TrimPrefix(id, "client."), Key: key}, true, nil
	case id != "" || key != "":
		return Credentials{}, false, status.Errorf(codes.InvalidArgument, "secrets must hold both %q and %q", secretUserID, secretUserKey)
	}
	if n.cfg.Credentials != nil {
		if c, ok := n.cfg.Credentials(clusterID); ok {
			return c, true, nil
		}
	}
	return Credentials{}, false, nil
}

func (n *NodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		// CSI 1.13 replaced VOLUME_CONDITION with NodeGetVolumeHealth.
		csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (n *NodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	// The topology is always there, empty without --domainlabels, as
	// ceph-csi's: the plugin advertises accessibility constraints, and
	// the spec's readers (csi-sanity among them) expect a node of such a
	// plugin to say where it is.
	seg := make(map[string]string, len(n.cfg.Topology))
	for k, v := range n.cfg.Topology {
		seg[k] = v
	}
	return &csi.NodeGetInfoResponse{NodeId: n.cfg.NodeID, MaxVolumesPerNode: n.cfg.MaxVolumes,
		AccessibleTopology: &csi.Topology{Segments: seg}}, nil
}
