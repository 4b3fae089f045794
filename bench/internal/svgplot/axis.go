package svgplot

import (
	"fmt"
	"math"
	"strconv"
)

// Scale maps data values onto an axis.
type Scale int

const (
	Linear Scale = iota // evenly spaced values; the axis starts at zero
	Log2                // powers of two evenly spaced (queue depths)
	Log10               // powers of ten evenly spaced (latencies)
)

// axis maps values in [min, max] onto pixels [p0, p1].
type axis struct {
	scale    Scale
	min, max float64
	p0, p1   float64
}

// newAxis fits an axis around the values (which must be positive for log
// scales; others are ignored).
func newAxis(scale Scale, values []float64, p0, p1 float64) axis {
	a := axis{scale: scale, p0: p0, p1: p1}
	first := true
	for _, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) || (scale != Linear && v <= 0) {
			continue
		}
		if first {
			a.min, a.max, first = v, v, false
			continue
		}
		a.min, a.max = math.Min(a.min, v), math.Max(a.max, v)
	}
	switch scale {
	case Linear:
		if first {
			a.min, a.max = 0, 1
		}
		a.min = math.Min(a.min, 0)
		if a.max <= a.min {
			a.max = a.min + 1
		}
		step := niceStep((a.max - a.min) / 5)
		a.max = math.Ceil(a.max/step) * step
	case Log2, Log10:
		if first {
			a.min, a.max = 1, 10
		}
		base := a.base()
		a.min = math.Pow(base, math.Floor(math.Log(a.min)/math.Log(base)))
		a.max = math.Pow(base, math.Ceil(math.Log(a.max)/math.Log(base)))
		if a.max <= a.min {
			a.max = a.min * base
		}
	}
	return a
}

func (a axis) base() float64 {
	if a.scale == Log2 {
		return 2
	}
	return 10
}

// pos is the pixel position of v.
func (a axis) pos(v float64) float64 {
	var f float64
	switch a.scale {
	case Linear:
		f = (v - a.min) / (a.max - a.min)
	default:
		if v <= 0 {
			v = a.min
		}
		f = (math.Log(v) - math.Log(a.min)) / (math.Log(a.max) - math.Log(a.min))
	}
	return a.p0 + f*(a.p1-a.p0)
}

// ticks returns the values to label.
func (a axis) ticks() []float64 {
	var t []float64
	switch a.scale {
	case Linear:
		step := niceStep((a.max - a.min) / 5)
		for v := a.min; v <= a.max+step/1e6; v += step {
			t = append(t, v)
		}
	case Log2:
		for v := a.min; v <= a.max*1.0001; v *= 2 {
			t = append(t, v)
		}
	case Log10:
		decades := math.Log10(a.max / a.min)
		for v := a.min; v <= a.max*1.0001; v *= 10 {
			t = append(t, v)
			if decades <= 2 {
				for _, m := range []float64{2, 5} {
					if v*m < a.max {
						t = append(t, v*m)
					}
				}
			}
		}
	}
	return t
}

// niceStep rounds a raw step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// label formats a tick value compactly: 1500 → "1.5k", 2e6 → "2M".
func label(v float64) string {
	abs := math.Abs(v)
	switch {
	case abs >= 1e9:
		return trim(v/1e9) + "G"
	case abs >= 1e6:
		return trim(v/1e6) + "M"
	case abs >= 1e4:
		return trim(v/1e3) + "k"
	case abs == 0:
		return "0"
	case abs < 0.01:
		return fmt.Sprintf("%.0e", v)
	}
	return trim(v)
}

func trim(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}
