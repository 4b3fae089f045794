package svgplot

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// wellFormed parses the document and counts its elements by name.
func wellFormed(t *testing.T, b []byte) map[string]int {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	n := map[string]int{}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		if se, ok := tok.(xml.StartElement); ok {
			n[se.Name.Local]++
		}
	}
}

func TestLineChart(t *testing.T) {
	lc := &LineChart{
		Title: "4k <randread> & co", XLabel: "queue depth", YLabel: "IOPS",
		XScale: Log2, YScale: Linear,
		XTicks: []float64{1, 8, 32, 128},
		Series: []Series{
			{Name: "purerbd", Points: []Point{{X: 1, Y: 900, Lo: 850, Hi: 950}, {X: 8, Y: 5000}, {X: 32, Y: 12000}}},
			{Name: "librbd", Points: []Point{{X: 32, Y: 11000}, {X: 1, Y: 1000}, {X: 8, Y: 6000}}},
		},
	}
	var b bytes.Buffer
	if err := lc.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	n := wellFormed(t, b.Bytes())
	if n["polyline"] != 2 || n["circle"] != 6 {
		t.Errorf("want 2 lines and 6 points, got %v", n)
	}
	if !strings.Contains(b.String(), "&lt;randread&gt; &amp; co") {
		t.Error("title not escaped")
	}
}

func TestLogAxis(t *testing.T) {
	a := newAxis(Log10, []float64{35, 4200}, 0, 300)
	if a.min != 10 || a.max != 10000 {
		t.Fatalf("log axis %v..%v, want 10..10000", a.min, a.max)
	}
	if p := a.pos(100); p < 99 || p > 101 {
		t.Errorf("pos(100) = %v, want 100", p)
	}
	l := newAxis(Linear, []float64{3, 97}, 0, 100)
	if l.min != 0 || l.max != 100 {
		t.Errorf("linear axis %v..%v, want 0..100", l.min, l.max)
	}
}

func TestBarChart(t *testing.T) {
	bc := &BarChart{
		Title: "ratio", YLabel: "purerbd/peer", Reference: 1,
		Categories: []string{"a", "b", "c"},
		Series:     []Series{{Name: "ratio", Points: []Point{{Y: 0.5}, {Y: 1.2, Lo: 1, Hi: 1.4}, {Y: 0.9}}}},
	}
	var b bytes.Buffer
	if err := bc.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	n := wellFormed(t, b.Bytes())
	if n["rect"] < 4 { // background + 3 bars (+ legend)
		t.Errorf("too few rects: %v", n)
	}
	bad := &BarChart{Categories: []string{"a"}, Series: []Series{{Name: "x"}}}
	if err := bad.WriteSVG(io.Discard); err == nil {
		t.Error("mismatched series accepted")
	}
}

func TestLabel(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1500: "1500", 25000: "25k", 2e6: "2M", 0.5: "0.5", 1.25: "1.25"} {
		if got := label(v); got != want {
			t.Errorf("label(%v) = %q, want %q", v, got, want)
		}
	}
}
