package svgplot

import (
	"errors"
	"io"
	"sort"
)

// Point is one data point. Lo and Hi, when they differ, draw an error bar
// (for example the min–max spread around a median).
type Point struct {
	X, Y   float64
	Lo, Hi float64
}

// Series is one named line or one bar colour.
type Series struct {
	Name   string
	Points []Point
}

// LineChart draws one line per series.
type LineChart struct {
	Title, XLabel, YLabel string
	XScale, YScale        Scale
	// XTicks, when set, are the only x values labelled (else the axis
	// picks its own); XTickLabels, when set, replace their numbers.
	XTicks      []float64
	XTickLabels []string
	Series      []Series
}

const (
	width, height        = 720.0, 380.0
	marginL, marginR     = 70.0, 170.0
	marginT, marginB     = 36.0, 48.0
	pointRadius, errTick = 3.0, 4.0
)

// WriteSVG writes the chart as a standalone SVG document.
func (lc *LineChart) WriteSVG(w io.Writer) error {
	if len(lc.Series) == 0 {
		return errors.New("svgplot: line chart without series")
	}
	if len(lc.XTickLabels) > 0 && len(lc.XTickLabels) != len(lc.XTicks) {
		return errors.New("svgplot: XTickLabels and XTicks differ in length")
	}
	var xs, ys []float64
	for _, s := range lc.Series {
		for _, p := range s.Points {
			xs = append(xs, p.X)
			ys = append(ys, p.Y, p.Lo, p.Hi)
		}
	}
	xs = append(xs, lc.XTicks...)
	c := newCanvas(width, height)
	xa := newAxis(lc.XScale, xs, marginL, width-marginR)
	ya := newAxis(lc.YScale, ys, height-marginB, marginT)
	xticks := lc.XTicks
	if xticks == nil {
		xticks = xa.ticks()
	}
	var xlabels []string
	if len(lc.XTickLabels) > 0 {
		xlabels = lc.XTickLabels
	}
	c.frame(xa, ya, xticks, xlabels, lc.Title, lc.XLabel, lc.YLabel)
	names := make([]string, len(lc.Series))
	for i, s := range lc.Series {
		names[i] = s.Name
		pts := append([]Point(nil), s.Points...)
		sort.Slice(pts, func(a, b int) bool { return pts[a].X < pts[b].X })
		px := make([]float64, len(pts))
		py := make([]float64, len(pts))
		for j, p := range pts {
			px[j], py[j] = xa.pos(p.X), ya.pos(p.Y)
			if p.Lo != p.Hi {
				lo, hi := ya.pos(p.Lo), ya.pos(p.Hi)
				c.line(px[j], lo, px[j], hi, colour(i), 1, false)
				c.line(px[j]-errTick, lo, px[j]+errTick, lo, colour(i), 1, false)
				c.line(px[j]-errTick, hi, px[j]+errTick, hi, colour(i), 1, false)
			}
		}
		c.polyline(px, py, colour(i))
		for j := range px {
			c.circle(px[j], py[j], pointRadius, colour(i))
		}
	}
	c.legend(width-marginR+16, marginT+8, names)
	return c.writeTo(w)
}
