package csi

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purerbd/purerbd/nbd"
)

// requestBuckets are the bounds of the NBD request latency histogram, in
// seconds: from a cached read to a request held through a reattach.
var requestBuckets = []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Reasons of purerbd_volume_reattaches_total.
const (
	reattachTakeover  = "takeover"         // a restarted plugin took the device over
	reattachConnsLost = "connections_lost" // every connection died while served
)

// volumeMetrics are the per-volume metrics of a node. Their series carry
// a volume_id label and exist only while the volume is staged: forget
// removes them at unstage.
type volumeMetrics struct {
	requests     *prometheus.CounterVec
	errors       *prometheus.CounterVec
	readBytes    *prometheus.CounterVec
	writtenBytes *prometheus.CounterVec
	durations    *prometheus.HistogramVec
	inFlight     *prometheus.GaugeVec
	stalls       *prometheus.CounterVec
	reattaches   *prometheus.CounterVec
	healed       *prometheus.CounterVec
	state        *volumeStateCollector

	mu        sync.Mutex
	observers map[string]*volumeObserver
}

func newVolumeMetrics() *volumeMetrics {
	vol := []string{"volume_id"}
	volOp := []string{"volume_id", "op"}
	return &volumeMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purerbd_volume_requests_total",
			Help: "NBD requests the node served for a staged volume, by operation (read, write, flush, trim, write_zeroes, block_status, cache).",
		}, volOp),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purerbd_volume_request_errors_total",
			Help: "NBD requests of a staged volume answered with an error, by operation.",
		}, volOp),
		readBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purerbd_volume_read_bytes_total",
			Help: "Bytes read from a staged volume by successful NBD reads.",
		}, vol),
		writtenBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purerbd_volume_written_bytes_total",
			Help: "Bytes written to a staged volume by successful NBD writes (not trims or zeroes).",
		}, vol),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "purerbd_volume_request_duration_seconds",
			Help:    "Time the node took to serve an NBD request of a staged volume, from its header read to its reply queued, by operation.",
			Buckets: requestBuckets,
		}, volOp),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "purerbd_volume_requests_in_flight",
			Help: "NBD requests of a staged volume being served now.",
		}, vol),
		stalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purerbd_volume_stalls_total",
			Help: "Times the kernel held a staged volume's I/O for want of a server: its device lost every connection while served, or was found unserved when the plugin took it over.",
		}, vol),
		reattaches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purerbd_volume_reattaches_total",
			Help: "Fresh connections handed to a staged volume's device by reattaching it, by reason (takeover: after a plugin restart; connections_lost: every connection died while served).",
		}, []string{"volume_id", "reason"}),
		healed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purerbd_volume_healed_connections_total",
			Help: "Connections of a staged volume's device that the kernel dropped (a request outlived its timeout) and the node replaced.",
		}, vol),
		state:     &volumeStateCollector{},
		observers: map[string]*volumeObserver{},
	}
}

func (m *volumeMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.errors, m.readBytes, m.writtenBytes, m.durations,
		m.inFlight, m.stalls, m.reattaches, m.healed, m.state}
}

// volume returns the observer of a volume, the same one for as long as
// it is staged; nil when m is nil.
func (m *Metrics) volume(id string) *volumeObserver {
	if m == nil {
		return nil
	}
	vm := m.vols
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if o := vm.observers[id]; o != nil {
		return o
	}
	o := &volumeObserver{
		m:            vm,
		id:           id,
		inFlight:     vm.inFlight.WithLabelValues(id),
		readBytes:    vm.readBytes.WithLabelValues(id),
		writtenBytes: vm.writtenBytes.WithLabelValues(id),
		stalls:       vm.stalls.WithLabelValues(id),
		healed:       vm.healed.WithLabelValues(id),
	}
	// Zero series from the start, so that rates work from the first
	// event on.
	for _, r := range []string{reattachTakeover, reattachConnsLost} {
		vm.reattaches.WithLabelValues(id, r)
	}
	vm.observers[id] = o
	return o
}

// forget removes every series of a volume (at unstage).
func (m *Metrics) forget(id string) {
	if m == nil {
		return
	}
	vm := m.vols
	vm.mu.Lock()
	defer vm.mu.Unlock()
	delete(vm.observers, id)
	l := prometheus.Labels{"volume_id": id}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{vm.requests, vm.errors, vm.readBytes, vm.writtenBytes, vm.durations, vm.inFlight, vm.stalls, vm.reattaches, vm.healed} {
		v.DeletePartialMatch(l)
	}
}

// volumeObserver records one volume's NBD requests (nbd.Observer) and
// device events. A nil *volumeObserver records nothing.
type volumeObserver struct {
	m            *volumeMetrics
	id           string
	inFlight     prometheus.Gauge
	readBytes    prometheus.Counter
	writtenBytes prometheus.Counter
	stalls       prometheus.Counter
	healed       prometheus.Counter
	ops          [8]atomic.Pointer[opMetrics] // by nbd.Command, made at first use
}

// opMetrics are the series of one operation of one volume.
type opMetrics struct {
	requests prometheus.Counter
	errors   prometheus.Counter
	duration prometheus.Observer
}

func (o *volumeObserver) op(c nbd.Command) *opMetrics {
	i := int(c)
	if i >= len(o.ops) {
		i = len(o.ops) - 1 // no such command is served; "other" in any case
	}
	if m := o.ops[i].Load(); m != nil {
		return m
	}
	name := c.String()
	m := &opMetrics{
		requests: o.m.requests.WithLabelValues(o.id, name),
		errors:   o.m.errors.WithLabelValues(o.id, name),
		duration: o.m.durations.WithLabelValues(o.id, name),
	}
	o.ops[i].CompareAndSwap(nil, m)
	return o.ops[i].Load()
}

// Started implements nbd.Observer.
func (o *volumeObserver) Started(nbd.Command) { o.inFlight.Inc() }

// Done implements nbd.Observer.
func (o *volumeObserver) Done(c nbd.Command, length uint32, d time.Duration, failed bool) {
	o.inFlight.Dec()
	m := o.op(c)
	m.requests.Inc()
	m.duration.Observe(d.Seconds())
	switch {
	case failed:
		m.errors.Inc()
	case c == nbd.CommandRead:
		o.readBytes.Add(float64(length))
	case c == nbd.CommandWrite:
		o.writtenBytes.Add(float64(length))
	}
}

// nbdObserver returns o as an nbd.Observer: nil (not a typed nil) when o
// is nil.
func (o *volumeObserver) nbdObserver() nbd.Observer {
	if o == nil {
		return nil
	}
	return o
}

// connectionReplaced counts a healed connection; it is the device's
// kernel.AttachConfig.ConnectionReplaced.
func (o *volumeObserver) connectionReplaced() {
	if o != nil {
		o.healed.Inc()
	}
}

// reattached counts a reattach of the volume's device.
func (o *volumeObserver) reattached(reason string) {
	if o != nil {
		o.m.reattaches.WithLabelValues(o.id, reason).Inc()
	}
}

// stalled counts a time the volume's I/O was held for want of a server.
func (o *volumeObserver) stalled() {
	if o != nil {
		o.stalls.Inc()
	}
}
