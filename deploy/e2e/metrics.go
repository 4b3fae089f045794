package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Sample is one series of a Prometheus text exposition.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are a scrape's series.
type Samples []Sample

// seriesLine is `name{labels} value [timestamp]`; labelPair one
// `key="value"` of the braces.
var (
	seriesLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// ParseMetrics reads Prometheus' text exposition format (version 0.0.4,
// what client_golang and the sidecars serve): comments are skipped, every
// other line must be a series.
func ParseMetrics(b []byte) (Samples, error) {
	var out Samples
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := seriesLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("metrics line %d: not a series: %q", n, line)
		}
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: value %q: %w", n, m[4], err)
		}
		s := Sample{Name: m[1], Labels: map[string]string{}, Value: v}
		for _, p := range labelPair.FindAllStringSubmatch(m[3], -1) {
			s.Labels[p[1]] = strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(p[2])
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// Sum adds up the series named name whose labels include match; ok is
// false when there is none.
func (s Samples) Sum(name string, match map[string]string) (sum float64, ok bool) {
	for _, x := range s {
		if x.Name != name {
			continue
		}
		all := true
		for k, v := range match {
			if x.Labels[k] != v {
				all = false
				break
			}
		}
		if all && !math.IsNaN(x.Value) {
			sum += x.Value
			ok = true
		}
	}
	return sum, ok
}

// Scrape reads a pod's metrics endpoint through the API server's pod
// proxy, as `kubectl get --raw` does: what a Prometheus in the cluster
// would read from the same port.
func (c *Cluster) Scrape(ctx context.Context, namespace, pod string, port int) (Samples, error) {
	out, err := c.Kubectl(ctx, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%d/proxy/metrics", namespace, pod, port))
	if err != nil {
		return nil, err
	}
	return ParseMetrics(out)
}
