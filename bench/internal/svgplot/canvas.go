package svgplot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
)

// palette colours the series in order (colour-blind safe, Okabe–Ito).
var palette = [...]string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9"}

func colour(i int) string { return palette[i%len(palette)] }

// canvas accumulates SVG elements.
type canvas struct {
	buf  bytes.Buffer
	w, h float64
}

func newCanvas(w, h float64) *canvas {
	c := &canvas{w: w, h: h}
	fmt.Fprintf(&c.buf, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&c.buf, `<rect width="%.0f" height="%.0f" fill="white"/>`+"\n", w, h)
	return c
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func (c *canvas) line(x1, y1, x2, y2 float64, stroke string, width float64, dash bool) {
	d := ""
	if dash {
		d = ` stroke-dasharray="4 3"`
	}
	fmt.Fprintf(&c.buf, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/>`+"\n", x1, y1, x2, y2, stroke, width, d)
}

func (c *canvas) rect(x, y, w, h float64, fill string) {
	fmt.Fprintf(&c.buf, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, y, w, h, fill)
}

func (c *canvas) circle(x, y, r float64, fill string) {
	fmt.Fprintf(&c.buf, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/>`+"\n", x, y, r, fill)
}

func (c *canvas) polyline(xs, ys []float64, stroke string) {
	fmt.Fprintf(&c.buf, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, stroke)
	for i := range xs {
		fmt.Fprintf(&c.buf, "%.1f,%.1f ", xs[i], ys[i])
	}
	c.buf.WriteString(`"/>` + "\n")
}

// text writes s anchored at (x, y); anchor is start, middle or end;
// rotate is in degrees around the anchor.
func (c *canvas) text(x, y float64, s, anchor string, rotate float64, bold bool) {
	extra := ""
	if rotate != 0 {
		extra = fmt.Sprintf(` transform="rotate(%.0f %.1f %.1f)"`, rotate, x, y)
	}
	if bold {
		extra += ` font-weight="bold" font-size="14"`
	}
	fmt.Fprintf(&c.buf, `<text x="%.1f" y="%.1f" text-anchor="%s"%s>%s</text>`+"\n", x, y, anchor, extra, esc(s))
}

// legend lists the series names top-right of the plot area.
func (c *canvas) legend(x, y float64, names []string) {
	for i, n := range names {
		yy := y + float64(i)*18
		c.rect(x, yy-9, 12, 12, colour(i))
		c.text(x+18, yy+1, n, "start", 0, false)
	}
}

// frame draws the axes box, grid, tick labels and axis titles.
func (c *canvas) frame(xa, ya axis, xticks []float64, xlabels []string, title, xlabel, ylabel string) {
	left, right := xa.p0, xa.p1
	bottom, top := ya.p0, ya.p1
	for _, v := range ya.ticks() {
		y := ya.pos(v)
		c.line(left, y, right, y, "#ddd", 1, false)
		c.text(left-6, y+4, label(v), "end", 0, false)
	}
	for i, v := range xticks {
		x := xa.pos(v)
		c.line(x, bottom, x, bottom+4, "#333", 1, false)
		l := label(v)
		if xlabels != nil {
			l = xlabels[i]
		}
		c.text(x, bottom+17, l, "middle", 0, false)
	}
	c.line(left, bottom, right, bottom, "#333", 1, false)
	c.line(left, bottom, left, top, "#333", 1, false)
	c.text(c.w/2, 20, title, "middle", 0, true)
	c.text((left+right)/2, c.h-8, xlabel, "middle", 0, false)
	c.text(16, (top+bottom)/2, ylabel, "middle", -90, false)
}

func (c *canvas) writeTo(w io.Writer) error {
	c.buf.WriteString("</svg>\n")
	_, err := w.Write(c.buf.Bytes())
	return err
}
