package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"sync"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/kubelet"
)

// kubeletOptions are the flags of what purerbd-csi does in place of the
// node-driver-registrar and livenessprobe sidecars (package csi/kubelet).
type kubeletOptions struct {
	registrationPath string // the CSI socket on the host; "" registers nothing
	registrationDir  string
	healthAddr       string // "" serves no health endpoint
}

func (k *kubeletOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&k.registrationPath, "kubelet-registration-path", "",
		"node: the CSI socket's path on the host as the kubelet reaches it (e.g. /var/lib/kubelet/plugins/rbd.purerbd.io/csi.sock); "+
			"when given, the plugin registers itself with the kubelet (no node-driver-registrar)")
	fs.StringVar(&k.registrationDir, "plugin-registration-dir", kubelet.DefaultRegistrationDir,
		"node: the kubelet's plugin registration directory, where the registration socket <drivername>-reg.sock is made")
	fs.StringVar(&k.healthAddr, "health-addr", "",
		"address to serve "+kubelet.HealthPath+" on for a liveness probe (e.g. :9808); it calls the plugin's CSI Probe (no livenessprobe sidecar); empty: none")
}

func (k *kubeletOptions) check(cfg csi.Config) error {
	if k.registrationPath != "" && !cfg.Node {
		return errors.New("--kubelet-registration-path registers a node plugin: it needs --node")
	}
	return nil
}

// serveWithKubelet runs the driver and, as the flags ask, the kubelet
// registration and the health endpoint beside it, until ctx ends or one
// of them fails; a failure of one stops the others.
func serveWithKubelet(ctx context.Context, cfg csi.Config, k kubeletOptions, runDriver func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	fail := func(err error) {
		if err == nil {
			return
		}
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	beside := func(serve func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail(serve(ctx))
		}()
	}
	if k.registrationPath != "" {
		reg, err := kubelet.NewRegistrar(kubelet.RegistrarConfig{
			DriverName:      cfg.DriverName,
			CSIEndpoint:     cfg.Endpoint,
			KubeletEndpoint: k.registrationPath,
			Dir:             k.registrationDir,
			Logger:          cfg.Logger,
		})
		if err != nil {
			return err
		}
		beside(reg.Serve)
	}
	if k.healthAddr != "" {
		h, err := kubelet.NewHealthHandler(kubelet.HealthConfig{CSIEndpoint: cfg.Endpoint, Logger: cfg.Logger})
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		defer h.Close()
		beside(func(ctx context.Context) error {
			return kubelet.ServeHealth(ctx, k.healthAddr, h, func(a net.Addr) {
				cfg.Logger.Info("serving the health endpoint", "addr", a.String(), "path", kubelet.HealthPath)
			})
		})
	}
	err := runDriver(ctx)
	cancel()
	wg.Wait()
	if err != nil {
		return err
	}
	return first
}
