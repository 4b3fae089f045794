package bench

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/purerbd/purerbd/bench/internal/svgplot"
)

// plot is one SVG file written next to the report.
type plot struct {
	File, Title string
}

// writeSVG renders a chart into dir/file.
func writeSVG(dir, file string, render func(io.Writer) error) error {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		return fmt.Errorf("plot %s: %w", file, err)
	}
	return os.WriteFile(filepath.Join(dir, file), b.Bytes(), 0o644)
}

// sectionPlots draws a section's charts: throughput against queue depth
// for each series of cases, latency percentiles for the cases marked
// "latplot", and the ratio purerbd/peer of every case.
func sectionPlots(dir string, sec *Section) ([]plot, error) {
	var plots []plot
	if len(sec.Contenders) < 2 {
		return nil, nil
	}
	// series of cases against queue depth
	var seriesNames []string
	bySeries := map[string][]*Case{}
	for _, c := range sec.Cases {
		if c.Series == "" {
			continue
		}
		if _, ok := bySeries[c.Series]; !ok {
			seriesNames = append(seriesNames, c.Series)
		}
		bySeries[c.Series] = append(bySeries[c.Series], c)
	}
	for _, name := range seriesNames {
		cases := bySeries[name]
		if len(cases) < 2 {
			continue // one queue depth is no line
		}
		lc := &svgplot.LineChart{
			Title:  fmt.Sprintf("%s: %s (median, min–max)", sec.Short, name),
			XLabel: "queue depth", YLabel: cases[0].Unit, XScale: svgplot.Log2,
		}
		for _, c := range cases {
			lc.XTicks = append(lc.XTicks, c.X)
		}
		for _, who := range sec.Contenders {
			ser := svgplot.Series{Name: who}
			for _, c := range cases {
				sp := c.spread(who)
				if sp.N > 0 {
					ser.Points = append(ser.Points, svgplot.Point{X: c.X, Y: sp.Median, Lo: sp.Min, Hi: sp.Max})
				}
			}
			lc.Series = append(lc.Series, ser)
		}
		file := sec.ID + "-" + slug(name) + ".svg"
		if err := writeSVG(dir, file, lc.WriteSVG); err != nil {
			return plots, err
		}
		plots = append(plots, plot{File: file, Title: name + " against queue depth"})
	}
	// latency distributions
	for _, c := range sec.Cases {
		if c.Params["latplot"] == "" {
			continue
		}
		lc := &svgplot.LineChart{
			Title:  fmt.Sprintf("%s: %s completion latency", sec.Short, c.Name),
			XLabel: "percentile", YLabel: "latency (µs)", YScale: svgplot.Log10,
		}
		for _, p := range []float64{50, 90, 99, 99.9, 99.99} {
			lc.XTicks = append(lc.XTicks, nines(p))
			lc.XTickLabels = append(lc.XTickLabels, strings.TrimSuffix(fmt.Sprintf("%g", p), ".0"))
		}
		drawn := false
		for _, who := range sec.Contenders {
			ser := svgplot.Series{Name: who}
			l := medianLatency(c, who)
			if l == nil {
				continue
			}
			for i, p := range l.Percentiles {
				if p >= 50 && l.Nanos[i] > 0 {
					ser.Points = append(ser.Points, svgplot.Point{X: nines(p), Y: l.Nanos[i] / 1e3})
				}
			}
			drawn = drawn || len(ser.Points) > 0
			lc.Series = append(lc.Series, ser)
		}
		if !drawn {
			continue
		}
		file := sec.ID + "-lat-" + slug(c.Name) + ".svg"
		if err := writeSVG(dir, file, lc.WriteSVG); err != nil {
			return plots, err
		}
		plots = append(plots, plot{File: file, Title: c.Name + " latency percentiles (median of runs)"})
	}
	// ratios
	peer := sec.Contenders[1]
	bc := &svgplot.BarChart{
		Title:     fmt.Sprintf("%s: %s/%s, ratio of medians", sec.Short, sec.Contenders[0], peer),
		YLabel:    "above 1: " + sec.Contenders[0] + " faster",
		Reference: 1,
	}
	ser := svgplot.Series{Name: sec.Contenders[0] + "/" + peer}
	for _, c := range sec.Cases {
		r := c.Ratio(sec.Contenders[0], peer)
		if math.IsNaN(r) {
			continue
		}
		bc.Categories = append(bc.Categories, c.Name)
		ser.Points = append(ser.Points, svgplot.Point{Y: r})
	}
	if len(bc.Categories) > 0 {
		bc.Series = []svgplot.Series{ser}
		file := sec.ID + "-ratio.svg"
		if err := writeSVG(dir, file, bc.WriteSVG); err != nil {
			return plots, err
		}
		plots = append(plots, plot{File: file, Title: "ratio of medians per case"})
	}
	return plots, nil
}

// nines maps a percentile to "number of nines": 90 → 1, 99 → 2, 99.9 → 3.
func nines(p float64) float64 { return -math.Log10(1 - p/100) }

// medianLatency is, percentile by percentile, the median over a
// contender's runs.
func medianLatency(c *Case, who string) *Latency {
	var ps []float64
	for _, s := range c.Samples[who] {
		if s.Lat != nil {
			ps = s.Lat.Percentiles
			break
		}
	}
	if ps == nil {
		return nil
	}
	l := &Latency{Percentiles: append([]float64(nil), ps...)}
	for _, p := range ps {
		l.Nanos = append(l.Nanos, c.medianLat(who, p))
	}
	return l
}

// removeOldPlots deletes the plots an earlier run of the suite left in
// dir (their names start with a section ID), so that a section that no
// longer draws one does not leave it behind.
func removeOldPlots(dir string) error {
	old, err := filepath.Glob(filepath.Join(dir, "*.svg"))
	if err != nil {
		return err
	}
	for _, f := range old {
		base := filepath.Base(f)
		if strings.HasPrefix(base, "nbd-") || strings.HasPrefix(base, "rados-") || strings.HasPrefix(base, "rbd-") {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// slug makes a file-name fragment: "4k randread" → "4k-randread".
func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
				b.WriteByte('-')
			}
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
