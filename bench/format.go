package bench

import (
	"fmt"
	"math"
)

// num formats a measurement with about three significant digits.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	}
	return fmt.Sprintf("%.3g", v)
}

// spreadCell is "median (min–max)".
func spreadCell(s Spread) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 {
		return num(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", num(s.Median), num(s.Min), num(s.Max))
}

// ratioCell prints a ratio with two decimals, bold when it is worse than
// 0.8 or better than 1.25 (the direction is for the reader: for
// throughput above 1 is purerbd faster).
func ratioCell(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "–"
	}
	s := fmt.Sprintf("%.2f", r)
	if r < 0.8 || r > 1.25 {
		s = "**" + s + "**"
	}
	return s
}

// bytesCell prints a byte count in MiB (or KiB when small).
func bytesCell(n int64) string {
	switch {
	case n <= 0:
		return "–"
	case n < 1<<20:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// micros formats nanoseconds as microseconds.
func micros(ns float64) string { return num(ns / 1e3) }
