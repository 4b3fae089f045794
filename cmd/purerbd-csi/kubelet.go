package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
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
	metricsAddr      string // "" serves no metrics endpoint
	// profiling serves Go's profiles (net/http/pprof) under
	// ProfilingPath on the metrics endpoint.
	profiling bool
	// metrics is the metrics endpoint's handler (newMetrics), set by run
	// when metricsAddr is given.
	metrics http.Handler
}

func (k *kubeletOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&k.registrationPath, "kubelet-registration-path", "",
		"node: the CSI socket's path on the host as the kubelet reaches it (e.g. /var/lib/kubelet/plugins/rbd.purerbd.io/csi.sock); "+
			"when given, the plugin registers itself with the kubelet (no node-driver-registrar)")
	fs.StringVar(&k.registrationDir, "plugin-registration-dir", kubelet.DefaultRegistrationDir,
		"node: the kubelet's plugin registration directory, where the registration socket <drivername>-reg.sock is made")
	fs.StringVar(&k.healthAddr, "health-addr", "",
		"address to serve "+kubelet.HealthPath+" on for a liveness probe (e.g. :9808); it calls the plugin's CSI Probe (no livenessprobe sidecar); empty: none")
	fs.StringVar(&k.metricsAddr, "metrics-address", "",
		"address to serve Prometheus metrics on at "+MetricsPath+" (e.g. :9090; the same as --health-addr serves both there); empty: none")
	fs.BoolVar(&k.profiling, "enable-profiling", false,
		"serve Go's runtime profiles (heap, goroutines, CPU) at "+ProfilingPath+" on the metrics endpoint (needs --metrics-address)")
}

func (k *kubeletOptions) check(cfg csi.Config) error {
	if k.registrationPath != "" && !cfg.Node {
		return errors.New("--kubelet-registration-path registers a node plugin: it needs --node")
	}
	if k.profiling && k.metricsAddr == "" {
		return errors.New("--enable-profiling serves the profiles on the metrics endpoint: it needs --metrics-address")
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
	var health http.Handler
	if k.healthAddr != "" {
		h, err := kubelet.NewHealthHandler(kubelet.HealthConfig{CSIEndpoint: cfg.Endpoint, Logger: cfg.Logger})
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		defer h.Close()
		health = h
	}
	shared := k.metrics != nil && k.metricsAddr == k.healthAddr
	if health != nil && !shared {
		beside(func(ctx context.Context) error {
			return kubelet.ServeHealth(ctx, k.healthAddr, health, func(a net.Addr) {
				cfg.Logger.Info("serving the health endpoint", "addr", a.String(), "path", kubelet.HealthPath)
			})
		})
	}
	if k.metrics != nil && k.metricsAddr != "" {
		h := k.metrics
		if shared {
			h = endpointMux(k.metrics, health)
		}
		beside(func(ctx context.Context) error {
			return serveHTTP(ctx, "metrics", k.metricsAddr, h, cfg.Logger)
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
