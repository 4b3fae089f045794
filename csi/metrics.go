package csi

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Metrics are the plugin's Prometheus metrics: its CSI calls and, on a
// node, the volumes it serves. Create them with NewMetrics on the
// registry the plugin exposes and hand them to Config and NodeConfig; a
// nil *Metrics records nothing.
type Metrics struct {
	calls     *prometheus.CounterVec
	durations *prometheus.HistogramVec
	vols      *volumeMetrics
}

// callBuckets are the bounds of the CSI call latency histogram, in
// seconds: from a capability query to a stage that formats a large
// volume.
var callBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// NewMetrics registers the plugin's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purerbd_csi_calls_total",
			Help: "CSI calls served, by gRPC method and status code.",
		}, []string{"method", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "purerbd_csi_call_duration_seconds",
			Help:    "Time to serve a CSI call, by gRPC method.",
			Buckets: callBuckets,
		}, []string{"method"}),
		vols: newVolumeMetrics(),
	}
	cs := append([]prometheus.Collector{m.calls, m.durations}, m.vols.collectors()...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, errors.Join(errors.New("csi: registering metrics"), err)
		}
	}
	return m, nil
}

// observeCalls is the gRPC interceptor that counts and times every call
// by method and code. It runs outside the panic recovery, so that a
// panic is counted as the INTERNAL error it becomes.
func (m *Metrics) observeCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	m.durations.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
	m.calls.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return resp, err
}

// interceptors returns the interceptors that record m, none for nil.
func (m *Metrics) interceptors() []grpc.UnaryServerInterceptor {
	if m == nil {
		return nil
	}
	return []grpc.UnaryServerInterceptor{m.observeCalls}
}
