package rbd

import "sort"

// intervals is a set of byte ranges, kept sorted, disjoint and with no
// two ranges touching (Ceph's interval_set), for diff computations.
type intervals []ival

// ival is the range [off, off+len).
type ival struct{ off, len uint64 }

func (iv ival) end() uint64 { return iv.off + iv.len }

// insert adds [off, off+n), merging with ranges it overlaps or touches.
func (s *intervals) insert(off, n uint64) {
	if n == 0 {
		return
	}
	end := off + n
	in := *s
	i := sort.Search(len(in), func(i int) bool { return in[i].end() >= off })
	j := i
	for j < len(in) && in[j].off <= end {
		off = min(off, in[j].off)
		end = max(end, in[j].end())
		j++
	}
	out := append(in[:i:i], ival{off, end - off})
	*s = append(out, in[j:]...)
}

// erase removes [off, off+n).
func (s *intervals) erase(off, n uint64) {
	if n == 0 {
		return
	}
	end := off + n
	var out intervals
	for _, iv := range *s {
		if iv.end() <= off || iv.off >= end {
			out = append(out, iv)
			continue
		}
		if iv.off < off {
			out = append(out, ival{iv.off, off - iv.off})
		}
		if iv.end() > end {
			out = append(out, ival{end, iv.end() - end})
		}
	}
	*s = out
}

// union adds every range of o.
func (s *intervals) union(o intervals) {
	for _, iv := range o {
		s.insert(iv.off, iv.len)
	}
}

// intersect returns the parts of s within [off, off+n), in order.
func (s intervals) intersect(off, n uint64) intervals {
	end := off + n
	var out intervals
	for _, iv := range s {
		lo, hi := max(iv.off, off), min(iv.end(), end)
		if lo < hi {
			out = append(out, ival{lo, hi - lo})
		}
	}
	return out
}
