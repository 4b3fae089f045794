package svgplot

import (
	"errors"
	"io"
	"math"
)

// BarChart draws, for each category, one bar per series side by side;
// series i takes its value for category j from Points[j].Y (X is
// ignored; Lo/Hi draw an error bar).
type BarChart struct {
	Title, YLabel string
	Categories    []string
	Series        []Series
	// Reference, when positive, draws a dashed line at that value (1.0
	// on a chart of ratios).
	Reference float64
}

// WriteSVG writes the chart as a standalone SVG document.
func (bc *BarChart) WriteSVG(w io.Writer) error {
	if len(bc.Series) == 0 || len(bc.Categories) == 0 {
		return errors.New("svgplot: bar chart without series or categories")
	}
	for _, s := range bc.Series {
		if len(s.Points) != len(bc.Categories) {
			return errors.New("svgplot: series " + s.Name + " has one value per category")
		}
	}
	// wide enough for every group, with room for slanted labels
	groupW := math.Max(40, 14*float64(len(bc.Series))+16)
	plotW := math.Max(width-marginL-marginR, groupW*float64(len(bc.Categories)))
	// the first label slants left from under its bar: leave room for it
	// (about 6.5 px a character at 12 px, cos 30° of it horizontally)
	left := math.Max(marginL, float64(len([]rune(bc.Categories[0])))*6.5*0.87-plotW/float64(len(bc.Categories))/2+10)
	w2 := left + plotW + marginR
	h := height + 60 // category labels are slanted below the axis
	ys := []float64{bc.Reference}
	for _, s := range bc.Series {
		for _, p := range s.Points {
			ys = append(ys, p.Y, p.Lo, p.Hi)
		}
	}
	c := newCanvas(w2, h)
	xa := axis{scale: Linear, min: 0, max: float64(len(bc.Categories)), p0: left, p1: left + plotW}
	ya := newAxis(Linear, ys, h-marginB-60, marginT)
	c.frame(xa, ya, nil, nil, bc.Title, "", bc.YLabel)
	gw := plotW / float64(len(bc.Categories))
	bw := (gw - 12) / float64(len(bc.Series))
	for j, cat := range bc.Categories {
		x0 := xa.pos(float64(j)) + 6
		for i, s := range bc.Series {
			p := s.Points[j]
			x := x0 + float64(i)*bw
			y := ya.pos(math.Max(p.Y, 0))
			c.rect(x, y, bw-1, ya.pos(0)-y, colour(i))
			if p.Lo != p.Hi {
				mid := x + (bw-1)/2
				c.line(mid, ya.pos(p.Lo), mid, ya.pos(p.Hi), "#333", 1, false)
			}
		}
		cx := xa.pos(float64(j) + 0.5)
		c.text(cx, ya.pos(0)+14, cat, "end", -30, false)
	}
	if bc.Reference > 0 {
		y := ya.pos(bc.Reference)
		c.line(xa.p0, y, xa.p1, y, "#333", 1, true)
	}
	names := make([]string, len(bc.Series))
	for i, s := range bc.Series {
		names[i] = s.Name
	}
	c.legend(w2-marginR+16, marginT+8, names)
	return c.writeTo(w)
}
