package crush

import "math"

// permState is the per-bucket scratch of the permutation choice used by
// uniform buckets and by the local fallback search (crush_work_bucket).
type permState struct {
	x    uint32
	n    uint32
	perm []uint32
}

// permChoose picks item r of a pseudo-random permutation of the bucket's
// items seeded by x, computing the permutation lazily.
func permChoose(b *Bucket, w *permState, x uint32, r int) int32 {
	size := uint32(len(b.Items))
	pr := uint32(r) % size
	var s uint32

	if w.x != x || w.n == 0 {
		w.x = x
		// Optimize the common r=0 case.
		if pr == 0 {
			s = Hash32_3(int(b.Hash), x, uint32(b.ID), 0) % size
			w.perm[0] = s
			w.n = 0xffff // see below
			return b.Items[s]
		}
		for i := uint32(0); i < size; i++ {
			w.perm[i] = i
		}
		w.n = 0
	} else if w.n == 0xffff {
		// Clean up after the r=0 shortcut.
		for i := uint32(1); i < size; i++ {
			w.perm[i] = i
		}
		w.perm[w.perm[0]] = 0
		w.n = 1
	}

	for w.n <= pr {
		p := w.n
		if p < size-1 {
			i := Hash32_3(int(b.Hash), x, uint32(b.ID), p) % (size - p)
			if i != 0 {
				w.perm[p+i], w.perm[p] = w.perm[p], w.perm[p+i]
			}
		}
		w.n++
	}
	s = w.perm[pr]
	return b.Items[s]
}

// listChoose walks a list bucket from the tail, keeping each item with a
// probability proportional to its share of the weight summed so far.
func listChoose(b *Bucket, x uint32, r int) int32 {
	for i := len(b.Items) - 1; i >= 0; i-- {
		w := uint64(Hash32_4(int(b.Hash), x, uint32(b.Items[i]), uint32(r), uint32(b.ID)))
		w &= 0xffff
		w *= uint64(b.SumWeights[i])
		w >>= 16
		if w < uint64(b.ItemWeights[i]) {
			return b.Items[i]
		}
	}
	return b.Items[0]
}

// treeHeight, treeLeft, treeRight navigate the implicit binary tree of a
// tree bucket (node n has height = number of trailing zero bits).
func treeHeight(n int) int {
	h := 0
	for n&1 == 0 {
		h++
		n >>= 1
	}
	return h
}

func treeLeft(n int) int  { return n - (1 << (treeHeight(n) - 1)) }
func treeRight(n int) int { return n + (1 << (treeHeight(n) - 1)) }

// treeChoose descends a tree bucket from the root, going left or right in
// proportion to the subtree weights. A malformed tree yields ItemNone,
// which the callers treat as a bad item.
func treeChoose(b *Bucket, x uint32, r int) int32 {
	nodes := len(b.NodeWeights)
	n := nodes >> 1
	for n&1 == 0 {
		if n == 0 || n >= nodes {
			return ItemNone
		}
		w := b.NodeWeights[n]
		t := uint64(Hash32_4(int(b.Hash), x, uint32(n), uint32(r), uint32(b.ID))) * uint64(w)
		t >>= 32
		l := treeLeft(n)
		if l < 0 || l >= nodes {
			return ItemNone
		}
		if t < uint64(b.NodeWeights[l]) {
			n = l
		} else {
			n = treeRight(n)
		}
	}
	if n>>1 >= len(b.Items) {
		return ItemNone
	}
	return b.Items[n>>1]
}

// strawChoose draws a straw per item scaled by its precomputed straw
// length and takes the longest.
func strawChoose(b *Bucket, x uint32, r int) int32 {
	high := 0
	var highDraw uint64
	for i, it := range b.Items {
		draw := uint64(Hash32_3(int(b.Hash), x, uint32(it), uint32(r)))
		draw &= 0xffff
		draw *= uint64(b.Straws[i])
		if i == 0 || draw > highDraw {
			high = i
			highDraw = draw
		}
	}
	return b.Items[high]
}

// straw2Choose draws an exponentially distributed value per item,
// inversely scaled by its weight, and takes the highest. A weight set and
// replacement ids from choose_args take precedence over the bucket's own.
func straw2Choose(b *Bucket, x uint32, r int, arg *ChooseArg, position int) int32 {
	weights := b.ItemWeights
	ids := b.Items
	if arg != nil {
		if len(arg.WeightSets) > 0 {
			p := position
			if p >= len(arg.WeightSets) {
				p = len(arg.WeightSets) - 1
			}
			weights = arg.WeightSets[p]
		}
		if len(arg.IDs) > 0 {
			ids = arg.IDs
		}
	}
	high := 0
	var highDraw int64
	for i := range b.Items {
		draw := int64(math.MinInt64)
		var w uint32
		if i < len(weights) {
			w = weights[i]
		}
		if w != 0 {
			var id int32
			if i < len(ids) {
				id = ids[i]
			}
			u := Hash32_3(int(b.Hash), x, uint32(id), uint32(r)) & 0xffff
			// ln is in [-2^48, 0]: the log of a uniform value in (0, 1].
			ln := int64(crushLn(u)) - 0x1000000000000
			draw = ln / int64(w)
		}
		if i == 0 || draw > highDraw {
			high = i
			highDraw = draw
		}
	}
	return b.Items[high]
}

// bucketChoose dispatches on the bucket algorithm. The bucket must not be
// empty.
func (ws *workspace) bucketChoose(b *Bucket, bi int, x uint32, r int, args ChooseArgMap, position int) int32 {
	switch b.Alg {
	case AlgUniform:
		return permChoose(b, ws.perm(bi, b), x, r)
	case AlgList:
		return listChoose(b, x, r)
	case AlgTree:
		return treeChoose(b, x, r)
	case AlgStraw:
		return strawChoose(b, x, r)
	case AlgStraw2:
		if arg, ok := args[bi]; ok {
			return straw2Choose(b, x, r, &arg, position)
		}
		return straw2Choose(b, x, r, nil, position)
	}
	return b.Items[0]
}
