package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/internal/promscrape"
)

// metricsPath is the unix socket the guest plugin serves its metrics on
// (the guest's loopback may be down: no TCP).
const metricsPath = "/run/csi/metrics.sock"

// serveMetrics serves the node's metrics, as purerbd-csi's
// --metrics-address does, on a unix socket for the scenario to scrape.
func serveMetrics(path string) (*csi.Metrics, error) {
	reg := prometheus.NewRegistry()
	m, err := csi.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(lis)
	return m, nil
}

// scrape reads the running plugin's metrics over HTTP.
func scrape(ctx context.Context) (promscrape.Families, error) {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", metricsPath)
	}}}
	return promscrape.ScrapeWith(ctx, c, "http://plugin/metrics")
}

// volumeMetric is one series of a volume's metric: its value, or an
// error naming it when it is missing.
func volumeMetric(f promscrape.Families, name, vol string, more ...string) (float64, error) {
	l := map[string]string{"volume_id": vol}
	for i := 0; i+1 < len(more); i += 2 {
		l[more[i]] = more[i+1]
	}
	v, ok := f.Value(name, l)
	if !ok {
		return 0, fmt.Errorf("metrics: no series %s%v", name, l)
	}
	return v, nil
}

// checkMetrics scrapes the plugin and checks each want against the
// value it found; the values go into the report's facts under key.
func (s *scenario) checkMetrics(ctx context.Context, key, vol string, wants ...metricWant) error {
	f, err := scrape(ctx)
	if err != nil {
		return err
	}
	got := map[string]float64{}
	for _, w := range wants {
		v, err := volumeMetric(f, w.name, vol, w.labels...)
		if err != nil {
			return err
		}
		got[w.String()] = v
		if !w.ok(v) {
			return fmt.Errorf("metrics: %s is %v", w, v)
		}
	}
	s.Facts[key] = got
	return nil
}

// metricWant is what a check wants of one series.
type metricWant struct {
	name   string
	labels []string
	what   string // "==" or ">="
	value  float64
}

func (w metricWant) String() string {
	return fmt.Sprintf("%s%v %s %v", w.name, w.labels, w.what, w.value)
}

func (w metricWant) ok(v float64) bool {
	if w.what == ">=" {
		return v >= w.value
	}
	return v == w.value
}

func eq(name string, v float64, labels ...string) metricWant {
	return metricWant{name: name, labels: labels, what: "==", value: v}
}

func atLeast(name string, v float64, labels ...string) metricWant {
	return metricWant{name: name, labels: labels, what: ">=", value: v}
}
