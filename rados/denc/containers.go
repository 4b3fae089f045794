package denc

// List reads a uint32 count followed by that many elements decoded by
// elem. minElemSize is the smallest encoding of one element, used to refuse
// counts the input cannot hold before allocating.
func List[T any](d *Decoder, what string, minElemSize int, elem func(d *Decoder) T) []T {
	n := d.Count(what, minElemSize)
	if n == 0 {
		return nil
	}
	out := make([]T, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, elem(d))
	}
	if d.err != nil {
		return nil
	}
	return out
}

// Map reads a uint32 count followed by that many key/value pairs decoded by
// kv. minPairSize is the smallest encoding of one pair.
func Map[K comparable, V any](d *Decoder, what string, minPairSize int, kv func(d *Decoder) (K, V)) map[K]V {
	n := d.Count(what, minPairSize)
	if d.err != nil {
		return nil
	}
	out := make(map[K]V, n)
	for i := 0; i < n && d.err == nil; i++ {
		k, v := kv(d)
		out[k] = v
	}
	if d.err != nil {
		return nil
	}
	return out
}

// Optional reads Ceph's std::optional / boost::optional encoding: a bool
// and, when true, the value.
func Optional[T any](d *Decoder, what string, val func(d *Decoder) T) (T, bool) {
	var zero T
	if !d.Bool(what + " present") {
		return zero, false
	}
	v := val(d)
	if d.err != nil {
		return zero, false
	}
	return v, true
}

// PutList appends a uint32 count and each element encoded by elem.
func PutList[T any](e *Encoder, s []T, elem func(e *Encoder, v T)) {
	e.U32(uint32(len(s)))
	for _, v := range s {
		elem(e, v)
	}
}

// PutMap appends a uint32 count and each pair, in the order given by keys
// (Ceph encodes std::map in key order; callers pass sorted keys).
func PutMap[K comparable, V any](e *Encoder, m map[K]V, keys []K, kv func(e *Encoder, k K, v V)) {
	e.U32(uint32(len(keys)))
	for _, k := range keys {
		kv(e, k, m[k])
	}
}
