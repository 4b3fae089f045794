package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// DefaultRegistrationDir is the kubelet's plugin registration directory,
// which it watches for plugin sockets.
const DefaultRegistrationDir = "/var/lib/kubelet/plugins_registry"

// supportedVersion is the CSI version the node plugin registers with;
// the kubelet accepts 1.0.0 and later 1.x.
const supportedVersion = "1.0.0"

// csiWaitInterval is how often Serve asks the CSI socket whether it
// answers yet.
const csiWaitInterval = time.Second

// RegistrarConfig configures a Registrar.
type RegistrarConfig struct {
	// DriverName is the CSI driver name; the plugin on CSIEndpoint must
	// report the same.
	DriverName string
	// CSIEndpoint is the plugin's CSI socket as this process reaches it
	// (e.g. unix:///csi/csi.sock).
	CSIEndpoint string
	// KubeletEndpoint is the path of that socket as the kubelet reaches it
	// on the host (e.g. /var/lib/kubelet/plugins/rbd.purerbd.io/csi.sock):
	// what GetInfo tells the kubelet.
	KubeletEndpoint string
	// Dir is the kubelet's plugin registration directory as this process
	// sees it (DefaultRegistrationDir if empty); the registration socket
	// is Dir/<DriverName>-reg.sock.
	Dir string
	// Logger receives the registration's events; slog.Default() if nil.
	Logger *slog.Logger
}

// Registrar registers a CSI node plugin with the kubelet: it serves the
// kubelet's Registration service (GetInfo, NotifyRegistrationStatus) on a
// socket in the kubelet's plugin registration directory, where the
// kubelet finds it, asks for the plugin's name and CSI socket, calls the
// plugin's NodeGetInfo and reports the outcome.
type Registrar struct {
	registerapi.UnimplementedRegistrationServer
	cfg  RegistrarConfig
	log  *slog.Logger
	path string
}

// NewRegistrar checks cfg.
func NewRegistrar(cfg RegistrarConfig) (*Registrar, error) {
	if cfg.DriverName == "" {
		return nil, errors.New("kubelet registration: no driver name")
	}
	if cfg.CSIEndpoint == "" {
		return nil, errors.New("kubelet registration: no CSI endpoint")
	}
	if !filepath.IsAbs(cfg.KubeletEndpoint) {
		return nil, fmt.Errorf("kubelet registration: the CSI socket's path on the host %q is not absolute", cfg.KubeletEndpoint)
	}
	if cfg.Dir == "" {
		cfg.Dir = DefaultRegistrationDir
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Registrar{
		cfg:  cfg,
		log:  cfg.Logger.With("registration", "kubelet"),
		path: filepath.Join(cfg.Dir, cfg.DriverName+"-reg.sock"),
	}, nil
}

// SocketPath is the registration socket.
func (r *Registrar) SocketPath() string { return r.path }

// Serve waits until the plugin answers on its CSI socket with the driver
// name configured, then serves the Registration service on the
// registration socket until ctx ends, and removes the socket.
//
// It returns an error when it cannot begin (the CSI socket reports
// another driver name, the socket cannot be made): deployment mistakes
// that no retry mends. A registration the kubelet reports as failed is
// logged and the service goes on: the kubelet retries registration from
// the start by itself, and exiting (as node-driver-registrar does) would
// take the plugin down with every volume it serves on this node.
func (r *Registrar) Serve(ctx context.Context) error {
	if err := r.waitForPlugin(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	lis, own, err := r.listen()
	if err != nil {
		return fmt.Errorf("kubelet registration: %w", err)
	}
	defer r.removeOwn(lis, own)
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	r.log.Info("registration socket ready for the kubelet", "socket", r.path,
		"driver", r.cfg.DriverName, "endpoint", r.cfg.KubeletEndpoint)
	stop := context.AfterFunc(ctx, srv.Stop)
	defer stop()
	if err := srv.Serve(lis); err != nil && ctx.Err() == nil {
		return fmt.Errorf("kubelet registration: %w", err)
	}
	return nil
}

// waitForPlugin calls GetPluginInfo on the CSI socket until it answers,
// as node-driver-registrar does before it registers: the kubelet calls
// NodeGetInfo as soon as it sees the registration socket.
func (r *Registrar) waitForPlugin(ctx context.Context) error {
	conn, err := dialCSI(r.cfg.CSIEndpoint)
	if err != nil {
		return fmt.Errorf("kubelet registration: %w", err)
	}
	defer conn.Close()
	id := csipb.NewIdentityClient(conn)
	logged := false
	for {
		cctx, cancel := context.WithTimeout(ctx, csiWaitInterval)
		info, err := id.GetPluginInfo(cctx, &csipb.GetPluginInfoRequest{})
		cancel()
		if err == nil {
			if info.GetName() != r.cfg.DriverName {
				return fmt.Errorf("kubelet registration: the plugin on %s is %q, not %q", r.cfg.CSIEndpoint, info.GetName(), r.cfg.DriverName)
			}
			return nil
		}
		if !logged {
			r.log.Info("waiting for the CSI socket before registering", "endpoint", r.cfg.CSIEndpoint, "error", err.Error())
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(csiWaitInterval):
		}
	}
}

// listen makes the registration socket, replacing one an earlier process
// left behind (each plugin start must listen anew under the same name).
// It returns the socket's file info, to recognise it at removal.
func (r *Registrar) listen() (net.Listener, fs.FileInfo, error) {
	if err := os.MkdirAll(r.cfg.Dir, 0o750); err != nil {
		return nil, nil, err
	}
	if fi, err := os.Lstat(r.path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, nil, fmt.Errorf("%s exists and is not a socket", r.path)
		}
		if err := os.Remove(r.path); err != nil {
			return nil, nil, fmt.Errorf("removing the stale registration socket: %w", err)
		}
		r.log.Info("removed a stale registration socket", "socket", r.path)
	}
	lis, err := net.Listen("unix", r.path)
	if err != nil {
		return nil, nil, err
	}
	// Serve removes the socket itself, and only if it is still its own.
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	own, err := os.Lstat(r.path)
	if err != nil {
		lis.Close()
		return nil, nil, err
	}
	return lis, own, nil
}

// removeOwn removes the registration socket unless another process has
// replaced it meanwhile: the kubelet takes a removed socket for the
// plugin's deregistration.
func (r *Registrar) removeOwn(lis net.Listener, own fs.FileInfo) {
	lis.Close()
	now, err := os.Lstat(r.path)
	if err != nil || !os.SameFile(own, now) {
		return
	}
	if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Warn("removing the registration socket", "socket", r.path, "error", err.Error())
	}
}

// GetInfo tells the kubelet what registers: a CSI plugin, its name and
// where the kubelet reaches its CSI socket.
func (r *Registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.cfg.DriverName,
		Endpoint:          r.cfg.KubeletEndpoint,
		SupportedVersions: []string{supportedVersion},
	}, nil
}

// NotifyRegistrationStatus receives the kubelet's verdict. A failure is
// logged as an error; the kubelet tries again on its own.
func (r *Registrar) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.GetPluginRegistered() {
		r.log.Info("registered with the kubelet", "driver", r.cfg.DriverName)
	} else {
		r.log.Error("the kubelet refused the registration; it retries by itself, the plugin keeps serving",
			"driver", r.cfg.DriverName, "error", strings.TrimSpace(st.GetError()))
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
