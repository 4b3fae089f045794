// Package promscrape scrapes a Prometheus text endpoint over HTTP for
// tests, and reads the metric list documented in deploy/README.md.
package promscrape

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Scrape GETs url and parses Prometheus' text format.
func Scrape(ctx context.Context, url string) (Families, error) {
	return ScrapeWith(ctx, http.DefaultClient, url)
}

// ScrapeWith is Scrape through client c (a unix socket's, say).
func ScrapeWith(ctx context.Context, c *http.Client, url string) (Families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return Families(fams), nil
}

// Names returns the family names with the given prefix, sorted.
func (f Families) Names(prefix string) []string {
	var l []string
	for n := range f {
		if strings.HasPrefix(n, prefix) {
			l = append(l, n)
		}
	}
	sort.Strings(l)
	return l
}

// Value returns the value of the series of family name whose labels
// include every pair of labels (counter, gauge or untyped; for a
// histogram its sample count), and whether there is one. Several
// matching series are summed.
func (f Families) Value(name string, labels map[string]string) (float64, bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	var sum float64
	found := false
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, found
}

// Doc is one metric as deploy/README.md documents it.
type Doc struct {
	Name   string
	Type   string
	Labels []string
}

// docRow matches a row of the metrics tables: | `name` | type | `a`, `b` | meaning |.
var docRow = regexp.MustCompile("^\\| `(purerbd_[a-z0-9_]+)` \\| (counter|gauge|histogram) \\| ([^|]*)\\|")

// ReadDocs reads the metrics documented in the tables of a Markdown file.
func ReadDocs(path string) (map[string]Doc, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	docs := map[string]Doc{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := docRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		d := Doc{Name: m[1], Type: m[2]}
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				d.Labels = append(d.Labels, l)
			}
		}
		sort.Strings(d.Labels)
		if _, dup := docs[d.Name]; dup {
			return nil, fmt.Errorf("%s documents %s twice", path, d.Name)
		}
		docs[d.Name] = d
	}
	return docs, sc.Err()
}

// Check compares the families of a scrape whose names start with one of
// prefixes with the documented ones of those prefixes: the same names,
// types and label names. It returns what differs.
func Check(fams Families, docs map[string]Doc, prefixes ...string) []string {
	var diffs []string
	has := func(n string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
		return false
	}
	for n, fam := range fams {
		if !has(n) {
			continue
		}
		d, ok := docs[n]
		if !ok {
			diffs = append(diffs, "exposed but not documented: "+n)
			continue
		}
		typ := strings.ToLower(fam.GetType().String())
		if typ != d.Type {
			diffs = append(diffs, fmt.Sprintf("%s: exposed as %s, documented as %s", n, typ, d.Type))
		}
		var labels []string
		if len(fam.GetMetric()) > 0 {
			for _, lp := range fam.GetMetric()[0].GetLabel() {
				labels = append(labels, lp.GetName())
			}
		}
		sort.Strings(labels)
		if strings.Join(labels, ",") != strings.Join(d.Labels, ",") {
			diffs = append(diffs, fmt.Sprintf("%s: labels %v exposed, %v documented", n, labels, d.Labels))
		}
	}
	for n := range docs {
		if has(n) && fams[n] == nil {
			diffs = append(diffs, "documented but not exposed: "+n)
		}
	}
	sort.Strings(diffs)
	return diffs
}
