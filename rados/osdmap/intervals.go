package osdmap

import "github.com/purerbd/purerbd/rados/denc"

// Interval is one run [Start, Start+Len) of an interval_set.
type Interval struct {
	Start, Len uint64
}

// Intervals is Ceph's interval_set<snapid_t>: sorted, disjoint runs.
type Intervals []Interval

func decodeIntervals(d *denc.Decoder, what string) Intervals {
	return decodeIntervalsN(d, what, d.Count(what, 16))
}

func decodeIntervalsN(d *denc.Decoder, what string, n int) Intervals {
	if d.Err() != nil || n == 0 {
		return nil
	}
	if int64(n)*16 > int64(d.Remaining()) {
		d.Failf(what, "%d intervals cannot fit in %d bytes", n, d.Remaining())
		return nil
	}
	out := make(Intervals, n)
	for i := range out {
		out[i] = Interval{Start: d.U64(what + " start"), Len: d.U64(what + " len")}
	}
	return out
}

func decodeIntervalsMap(d *denc.Decoder, what string) map[int64]Intervals {
	return denc.Map(d, what, 12, func(d *denc.Decoder) (int64, Intervals) {
		return d.I64(what + " pool"), decodeIntervals(d, what)
	})
}

// Contains reports whether x lies in one of the runs.
func (s Intervals) Contains(x uint64) bool {
	for _, iv := range s {
		if x >= iv.Start && x-iv.Start < iv.Len {
			return true
		}
	}
	return false
}

// union returns the union of two interval sets.
func (s Intervals) union(o Intervals) Intervals {
	all := append(append(Intervals(nil), s...), o...)
	sortIntervals(all)
	var out Intervals
	for _, iv := range all {
		if iv.Len == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Start+out[n-1].Len >= iv.Start {
			if end := iv.Start + iv.Len; end > out[n-1].Start+out[n-1].Len {
				out[n-1].Len = end - out[n-1].Start
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

// subtract removes o's runs from s.
func (s Intervals) subtract(o Intervals) Intervals {
	out := append(Intervals(nil), s...)
	for _, r := range o {
		rEnd := r.Start + r.Len
		var next Intervals
		for _, iv := range out {
			end := iv.Start + iv.Len
			if rEnd <= iv.Start || r.Start >= end {
				next = append(next, iv)
				continue
			}
			if iv.Start < r.Start {
				next = append(next, Interval{iv.Start, r.Start - iv.Start})
			}
			if rEnd < end {
				next = append(next, Interval{rEnd, end - rEnd})
			}
		}
		out = next
	}
	return out
}

func sortIntervals(s Intervals) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].Start < s[j-1].Start; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
