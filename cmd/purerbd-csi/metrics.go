package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/kubelet"
	"github.com/purerbd/purerbd/csi/rbdstore"
)

// MetricsPath is where the metrics endpoint answers.
const MetricsPath = "/metrics"

// metricsShutdownTimeout bounds the end of the metrics server.
const metricsShutdownTimeout = 5 * time.Second

// sessionSource lists the plugin's Ceph connections (rbdstore.Store).
type sessionSource interface {
	Sessions() []rbdstore.SessionStats
}

// newMetrics builds the registry the metrics endpoint exposes: the Go
// runtime's and the process's collectors, the CSI calls and staged
// volumes (csi.Metrics), and the Ceph sessions of src.
func newMetrics(src sessionSource) (*prometheus.Registry, *csi.Metrics, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, err
	}
	m, err := csi.NewMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	if err := reg.Register(&sessionCollector{src: src}); err != nil {
		return nil, nil, err
	}
	return reg, m, nil
}

// ProfilingPath is where --enable-profiling serves Go's profiles, as
// net/http/pprof names them (ProfilingPath+"heap", +"profile", ...).
const ProfilingPath = "/debug/pprof/"

// metricsHandler serves reg in Prometheus' text format (and OpenMetrics
// to a scraper that asks for it), and with profiling Go's runtime
// profiles under ProfilingPath, for `go tool pprof`.
func metricsHandler(reg *prometheus.Registry, log *slog.Logger, profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		EnableOpenMetrics: true,
	}))
	if profiling {
		// pprof.Index serves every named profile (heap, allocs,
		// goroutine, ...) below it; the CPU profile and trace have
		// handlers of their own.
		mux.HandleFunc(ProfilingPath, pprof.Index)
		mux.HandleFunc(ProfilingPath+"cmdline", pprof.Cmdline)
		mux.HandleFunc(ProfilingPath+"profile", pprof.Profile)
		mux.HandleFunc(ProfilingPath+"symbol", pprof.Symbol)
		mux.HandleFunc(ProfilingPath+"trace", pprof.Trace)
	}
	return mux
}

// endpointMux serves the metrics and, when the health endpoint shares
// its address, the health endpoint too.
func endpointMux(metrics, health http.Handler) http.Handler {
	if health == nil {
		return metrics
	}
	mux := http.NewServeMux()
	mux.Handle("/", metrics)
	mux.Handle(kubelet.HealthPath, health)
	return mux
}

// serveHTTP serves h on addr until ctx ends.
func serveHTTP(ctx context.Context, what, addr string, h http.Handler, log *slog.Logger) error {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("%s endpoint: %w", what, err)
	}
	log.Info("serving the "+what+" endpoint", "addr", lis.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), metricsShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
	})
	defer stop()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s endpoint: %w", what, err)
	}
	return nil
}
