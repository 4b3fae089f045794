// Package csi is purerbd's Container Storage Interface plugin: the
// Identity and Controller services (and the Node service) for RBD images,
// served over gRPC on a unix socket.
//
// The controller talks to Ceph through an ImageStore (package
// csi/rbdstore in production). Volume and snapshot IDs are described in
// volumeid.go, image naming, idempotency and deferred deletion in names.go.
package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultDriverName is the CSI driver name unless Config.DriverName says
// otherwise.
const DefaultDriverName = "rbd.purerbd.io"

// nodeCloseTimeout bounds handing the node's devices over at exit.
const nodeCloseTimeout = 30 * time.Second

// Config configures a Driver.
type Config struct {
	// DriverName is reported by GetPluginInfo; DefaultDriverName if empty.
	DriverName string
	// Version is reported by GetPluginInfo (internal/buildinfo).
	Version string
	// NodeID identifies this node (the Kubernetes node name).
	NodeID string
	// Endpoint is the unix socket to serve on: "unix:///csi/csi.sock",
	// "unix:/csi/csi.sock" or a plain path.
	Endpoint string
	// ClusterConfigPath is the cluster configuration file (ceph-csi's
	// config.json shape), read again on every request that needs it.
	ClusterConfigPath string
	// KMSConfigPath is the KMS configuration for encrypted classes
	// that name an encryptionKMSID (kms.go); "" is
	// DefaultKMSConfigPath. Secrets reads the Kubernetes Secrets its
	// sections name; nil when the API cannot be reached.
	KMSConfigPath string
	Secrets       SecretReader
	// Controller and Node select the services served besides Identity.
	Controller bool
	Node       bool

	// Store reaches Ceph; required for the controller role.
	Store ImageStore
	// NodeServer is the node service (NewNodeServer); required for the
	// node role. Serve starts it before serving and closes it, handing
	// its devices over to the next process, when it stops.
	NodeServer *NodeServer
	// Credentials are the plugin's own, for calls without secrets.
	Credentials CredentialSource
	// Topology, when not empty, is this node's topology segments; the
	// plugin then advertises VOLUME_ACCESSIBILITY_CONSTRAINTS.
	Topology map[string]string
	// Logger receives structured logs; slog.Default() if nil.
	Logger *slog.Logger
	// CephCSIInstanceID is the --instanceid of the ceph-csi deployment
	// whose volumes the driver took over: it names ceph-csi's journal
	// directories, cleaned up when such a volume is deleted.
	// DefaultCephCSIInstanceID if empty.
	CephCSIInstanceID string
	// Metrics, when set, count and time every CSI call (NewMetrics).
	Metrics *Metrics

	// SweepInterval is how often the controller runs Sweep; 0 never.
	SweepInterval time.Duration
	// ClusterCheckInterval is how often the controller checks that its
	// clusters answer (ClusterStatus); 0 means
	// DefaultClusterCheckInterval, a negative value never.
	ClusterCheckInterval time.Duration

	// FaultHook, for tests, is called before each internal step of the
	// controller's multi-step operations (steps are named like
	// "create-volume/clone"); an error it returns ends the call there
	// with INTERNAL, as if the plugin had died at that point.
	FaultHook func(step string) error
}

// Driver is a CSI plugin: Identity plus the services Config selects.
type Driver struct {
	cfg      Config
	log      *slog.Logger
	inFlight *inFlight
	health   clusterHealth
}

// NewDriver returns a Driver for cfg; Run checks cfg.
func NewDriver(cfg Config) *Driver {
	if cfg.DriverName == "" {
		cfg.DriverName = DefaultDriverName
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClusterCheckInterval == 0 {
		cfg.ClusterCheckInterval = DefaultClusterCheckInterval
	}
	return &Driver{cfg: cfg, log: cfg.Logger, inFlight: newInFlight()}
}

func (d *Driver) check() error {
	if !d.cfg.Controller && !d.cfg.Node {
		return errors.New("csi: neither the controller nor the node role is selected")
	}
	if d.cfg.Node && d.cfg.NodeServer == nil {
		return errors.New("csi: the node role needs a node server")
	}
	if d.cfg.Controller && d.cfg.Store == nil {
		return errors.New("csi: the controller role needs an image store")
	}
	if d.cfg.ClusterConfigPath == "" {
		return errors.New("csi: no cluster config path")
	}
	if err := checkDriverName(d.cfg.DriverName); err != nil {
		return err
	}
	return nil
}

// checkDriverName applies the CSI spec's rules for plugin names.
func checkDriverName(n string) error {
	if len(n) > 63 {
		return fmt.Errorf("csi: driver name %q is longer than 63 characters", n)
	}
	for i, c := range n {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || i == len(n)-1 || (c != '-' && c != '.' && c != '_')) {
			return fmt.Errorf("csi: driver name %q: only alphanumerics, '-', '.' and '_' inside, alphanumerics at the ends", n)
		}
	}
	return nil
}

// Run listens on cfg.Endpoint and serves until ctx is cancelled.
func (d *Driver) Run(ctx context.Context) error {
	if err := d.check(); err != nil {
		return err
	}
	path, err := socketPath(d.cfg.Endpoint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("csi: %w", err)
	}
	// A socket left by an earlier run would make Listen fail.
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("csi: removing stale socket: %w", err)
		}
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("csi: %w", err)
	}
	defer os.Remove(path)
	return d.Serve(ctx, lis)
}

// Serve serves on lis until ctx is cancelled, then stops gracefully
// (waiting at most 10 seconds for calls in flight).
func (d *Driver) Serve(ctx context.Context, lis net.Listener) (err error) {
	if err := d.check(); err != nil {
		lis.Close()
		return err
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(append(d.cfg.Metrics.interceptors(), d.logCalls, d.recoverPanics)...))
	csi.RegisterIdentityServer(srv, &identity{d: d})
	if d.cfg.Controller {
		csi.RegisterControllerServer(srv, &controller{d: d})
		csi.RegisterSnapshotMetadataServer(srv, &snapshotMetadata{d: d})
		csi.RegisterGroupControllerServer(srv, &groupController{d: d})
	}
	if d.cfg.Node {
		// Take over what a previous process staged before answering.
		if err := d.cfg.NodeServer.Start(ctx); err != nil {
			lis.Close()
			return err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nodeCloseTimeout)
			defer cancel()
			if cerr := d.cfg.NodeServer.Close(cctx); cerr != nil && err == nil {
				err = cerr
			}
		}()
		csi.RegisterNodeServer(srv, d.cfg.NodeServer)
	}
	d.log.Info("serving CSI", "driver", d.cfg.DriverName, "version", d.cfg.Version,
		"endpoint", lis.Addr().String(), "controller", d.cfg.Controller, "node", d.cfg.Node, "nodeID", d.cfg.NodeID)
	done := make(chan struct{})
	if d.cfg.Controller && d.cfg.SweepInterval > 0 {
		go d.sweepEvery(ctx, done, d.cfg.SweepInterval)
	}
	// The cluster checks end with the serving, before Serve returns.
	checkCtx, stopChecks := context.WithCancel(ctx)
	checked := make(chan struct{})
	if d.cfg.Controller && d.cfg.ClusterCheckInterval > 0 {
		go func() {
			defer close(checked)
			d.checkClustersEvery(checkCtx, done, d.cfg.ClusterCheckInterval)
		}()
	} else {
		close(checked)
	}
	go func() {
		select {
		case <-ctx.Done():
			stopped := make(chan struct{})
			go func() { srv.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				srv.Stop()
			}
		case <-done:
		}
	}()
	err = srv.Serve(lis)
	close(done)
	stopChecks()
	<-checked
	if ctx.Err() != nil && (err == nil || errors.Is(err, grpc.ErrServerStopped)) {
		return nil
	}
	return err
}

// sweepEvery runs Sweep every interval until ctx is cancelled or done
// closed.
func (d *Driver) sweepEvery(ctx context.Context, done <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-t.C:
			if err := d.Sweep(ctx); err != nil {
				d.log.Warn("sweep", "error", errorMessage(err))
			}
		}
	}
}

// socketPath accepts "unix:///p", "unix:/p", "unix://p" and plain paths.
func socketPath(endpoint string) (string, error) {
	if endpoint == "" {
		return "", errors.New("csi: no endpoint")
	}
	if !strings.Contains(endpoint, ":") {
		return endpoint, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "unix" {
		return "", fmt.Errorf("csi: endpoint %q is not a unix socket (unix:///path)", endpoint)
	}
	p := u.Path
	if u.Host != "" {
		p = u.Host + p // "unix://relative/path"
	}
	if p == "" {
		p = u.Opaque
	}
	if p == "" {
		return "", fmt.Errorf("csi: endpoint %q has no path", endpoint)
	}
	return p, nil
}

// logCalls logs every call with its duration and outcome. It never logs
// requests themselves: they may hold secrets.
func (d *Driver) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	attrs := []any{"method", info.FullMethod, "duration", time.Since(start).Round(time.Microsecond)}
	if r, ok := req.(interface{ GetVolumeId() string }); ok && r.GetVolumeId() != "" {
		attrs = append(attrs, "volumeID", r.GetVolumeId())
	}
	if r, ok := req.(interface{ GetName() string }); ok && r.GetName() != "" {
		attrs = append(attrs, "name", r.GetName())
	}
	if r, ok := req.(interface{ GetSnapshotId() string }); ok && r.GetSnapshotId() != "" {
		attrs = append(attrs, "snapshotID", r.GetSnapshotId())
	}
	if r, ok := req.(interface{ GetGroupSnapshotId() string }); ok && r.GetGroupSnapshotId() != "" {
		attrs = append(attrs, "groupSnapshotID", r.GetGroupSnapshotId())
	}
	if err != nil {
		s := status.Convert(err)
		d.log.Warn("CSI call failed", append(attrs, "code", s.Code().String(), "error", s.Message())...)
	} else {
		d.log.Debug("CSI call", attrs...)
	}
	return resp, err
}

// clusters loads the cluster configuration.
func (d *Driver) clusters() (Clusters, error) { return LoadClusters(d.cfg.ClusterConfigPath) }

// step runs the fault hook before an internal step.
func (d *Driver) step(name string) error {
	if d.cfg.FaultHook == nil {
		return nil
	}
	if err := d.cfg.FaultHook(name); err != nil {
		return status.Errorf(codes.Internal, "step %s: %v", name, err)
	}
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
