package crush

import (
	"errors"
	"fmt"
)

// ErrWorkBound is returned by DoRuleErr when a mapping gives up after
// MaxWork units of work: the map asks for more retries, replicas or
// descents than any real placement needs (see MaxWork).
var ErrWorkBound = errors.New("crush: mapping exceeds the work bound")

// MaxWork bounds the work of one DoRule call, counted as bucket items
// weighed (each choice in a bucket counts the bucket's size, at least 1).
// Ceph's mapper is bounded only by what the map says: choose_total_tries
// and the set_choose*_tries steps are 32-bit values, a choose step may
// ask for 2^31 replicas that are all rejected, and local fallback scans
// whole buckets, so a damaged or hostile map can make one placement run
// for hours. Real placements, even on large clusters with many OSDs out,
// weigh orders of magnitude fewer items; the oracle tests against
// crushtool and osdmaptool stay far below it. A mapping that reaches the
// bound maps to nothing (ErrWorkBound from DoRuleErr).
const MaxWork = 1 << 21

// workspace is the scratch of one mapping: permutation state for the
// buckets that need it, allocated on first use.
type workspace struct {
	perms []*permState
}

func (ws *workspace) perm(bi int, b *Bucket) *permState {
	if ws.perms == nil {
		ws.perms = make([]*permState, bi+1)
	}
	if bi >= len(ws.perms) {
		grown := make([]*permState, bi+1)
		copy(grown, ws.perms)
		ws.perms = grown
	}
	p := ws.perms[bi]
	if p == nil {
		p = &permState{perm: make([]uint32, len(b.Items))}
		ws.perms[bi] = p
	}
	return p
}

// mapping carries what stays fixed during one crush_do_rule call.
type mapping struct {
	m       *Map
	ws      workspace
	weights []uint32
	args    ChooseArgMap
	x       uint32
	// work counts bucket items weighed so far (see MaxWork); over is set
	// once it passes limit (MaxWork), and every loop of the mapper then
	// ends.
	work  int
	limit int
	over  bool
}

// charge counts a choice among the items of a bucket and reports whether
// the mapping may go on.
func (mp *mapping) charge(items int) bool {
	mp.work += max(1, items)
	if mp.work > mp.limit {
		mp.over = true
	}
	return !mp.over
}

// bucketAt returns the bucket for a negative item id and its index, or
// nil when the id names no bucket.
func (mp *mapping) bucketAt(item int32) (*Bucket, int) {
	if item >= 0 {
		return nil, -1
	}
	bi := int(-1 - int64(item))
	if bi >= len(mp.m.Buckets) {
		return nil, -1
	}
	return mp.m.Buckets[bi], bi
}

// isOut reports whether a device is rejected by its (reweight) weight:
// always when 0, never when >= 1.0, else with probability 1-weight.
func (mp *mapping) isOut(item int32) bool {
	if item < 0 || int(item) >= len(mp.weights) {
		return true
	}
	w := mp.weights[item]
	if w >= 0x10000 {
		return false
	}
	if w == 0 {
		return true
	}
	return Hash32_2(HashRjenkins1, mp.x, uint32(item))&0xffff >= w
}

// itemType returns the type of an item (0 for devices) and whether it is
// usable at all; an id naming no bucket is not.
func (mp *mapping) itemType(item int32) (int, bool) {
	if item >= 0 {
		return 0, true
	}
	b, _ := mp.bucketAt(item)
	if b == nil {
		return 0, false
	}
	return int(b.Type), true
}

type firstnParams struct {
	tries, recurseTries         uint32
	localRetries, localFallback uint32
	recurseToLeaf               bool
	varyR, stable               uint32
}

// chooseFirstN is crush_choose_firstn: choose up to numrep distinct items
// of the given type below bucket, appending at out[outpos:]; with
// recurseToLeaf, also one device under each into out2. It returns the new
// outpos.
func (mp *mapping) chooseFirstN(bucket *Bucket, bucketIdx int, numrep, typ int,
	out []int32, outpos, outSize int, p firstnParams, out2 []int32, parentR int) int {
	count := outSize
	startRep := outpos
	if p.stable != 0 {
		startRep = 0
	}
	var item int32
	for rep := startRep; rep < numrep && count > 0 && !mp.over; rep++ {
		ftotal := uint32(0)
		skipRep := false
		for {
			retryDescent := false
			in, inIdx := bucket, bucketIdx
			flocal := uint32(0)
			depth := 0
			for {
				collide := false
				retryBucket := false
				r := rep + parentR + int(ftotal)
				reject := false
				var itemtype int

				if !mp.charge(len(in.Items)) {
					skipRep = true
					break
				}
				if len(in.Items) == 0 {
					reject = true
				} else {
					if p.localFallback > 0 && flocal >= uint32(len(in.Items))>>1 && flocal > p.localFallback {
						item = permChoose(in, mp.ws.perm(inIdx, in), mp.x, r)
					} else {
						item = mp.ws.bucketChoose(in, inIdx, mp.x, r, mp.args, outpos)
					}
					if item >= mp.m.MaxDevices {
						skipRep = true
						break
					}
					var ok bool
					itemtype, ok = mp.itemType(item)
					if !ok {
						skipRep = true
						break
					}
					if itemtype != typ {
						next, nextIdx := mp.bucketAt(item)
						// A descent deeper than the number of buckets means
						// the hierarchy has a cycle; Ceph would loop forever.
						if depth++; item >= 0 || next == nil || depth > len(mp.m.Buckets) {
							skipRep = true
							break
						}
						in, inIdx = next, nextIdx
						continue // retry_bucket with the new bucket
					}
					for i := 0; i < outpos; i++ {
						if out[i] == item {
							collide = true
							break
						}
					}
					if !collide && p.recurseToLeaf {
						if item < 0 {
							subR := 0
							if p.varyR != 0 {
								subR = r >> (p.varyR - 1)
							}
							sub, subIdx := mp.bucketAt(item)
							subNumrep := outpos + 1
							if p.stable != 0 {
								subNumrep = 1
							}
							leafParams := firstnParams{
								tries:         p.recurseTries,
								localRetries:  p.localRetries,
								localFallback: p.localFallback,
								varyR:         p.varyR,
								stable:        p.stable,
							}
							if mp.chooseFirstN(sub, subIdx, subNumrep, 0, out2, outpos, count,
								leafParams, nil, subR) <= outpos {
								reject = true // no leaf found
							}
						} else {
							out2[outpos] = item // already a leaf
						}
					}
					if !reject && !collide && itemtype == 0 {
						reject = mp.isOut(item)
					}
				}

				if reject || collide {
					ftotal++
					flocal++
					switch {
					case collide && flocal <= p.localRetries:
						retryBucket = true // retry locally a few times
					case p.localFallback > 0 && flocal <= uint32(len(in.Items))+p.localFallback:
						retryBucket = true // exhaustive bucket search
					case ftotal < p.tries:
						retryDescent = true // then retry descent
					default:
						skipRep = true // else give up
					}
				}
				if !retryBucket {
					break
				}
			}
			if !retryDescent {
				break
			}
		}
		if skipRep {
			continue
		}
		out[outpos] = item
		outpos++
		count--
	}
	return outpos
}

// chooseIndep is crush_choose_indep: a breadth-first, position-stable
// choice that leaves ItemNone holes instead of shifting results.
func (mp *mapping) chooseIndep(bucket *Bucket, bucketIdx int, left, numrep, typ int,
	out []int32, outpos int, tries, recurseTries uint32, recurseToLeaf bool,
	out2 []int32, parentR int) {
	endpos := outpos + left
	for rep := outpos; rep < endpos; rep++ {
		out[rep] = itemUndef
		if out2 != nil {
			out2[rep] = itemUndef
		}
	}
	for ftotal := uint32(0); left > 0 && ftotal < tries && !mp.over; ftotal++ {
		for rep := outpos; rep < endpos && !mp.over; rep++ {
			if out[rep] != itemUndef {
				continue
			}
			in, inIdx := bucket, bucketIdx
			depth := 0
			for {
				// Base the choice on the position even in nested calls.
				r := rep + parentR
				if in.Alg == AlgUniform && len(in.Items)%numrep == 0 {
					r += (numrep + 1) * int(ftotal)
				} else {
					r += numrep * int(ftotal)
				}
				if !mp.charge(len(in.Items)) || len(in.Items) == 0 {
					break
				}
				item := mp.ws.bucketChoose(in, inIdx, mp.x, r, mp.args, outpos)
				if item >= mp.m.MaxDevices {
					out[rep] = ItemNone
					if out2 != nil {
						out2[rep] = ItemNone
					}
					left--
					break
				}
				itemtype, ok := mp.itemType(item)
				if !ok {
					out[rep] = ItemNone
					if out2 != nil {
						out2[rep] = ItemNone
					}
					left--
					break
				}
				if itemtype != typ {
					next, nextIdx := mp.bucketAt(item)
					if depth++; item >= 0 || next == nil || depth > len(mp.m.Buckets) {
						out[rep] = ItemNone
						if out2 != nil {
							out2[rep] = ItemNone
						}
						left--
						break
					}
					in, inIdx = next, nextIdx
					continue
				}
				collide := false
				for i := outpos; i < endpos; i++ {
					if out[i] == item {
						collide = true
						break
					}
				}
				if collide {
					break
				}
				if recurseToLeaf {
					if item < 0 {
						sub, subIdx := mp.bucketAt(item)
						mp.chooseIndep(sub, subIdx, 1, numrep, 0, out2, rep,
							recurseTries, 0, false, nil, r)
						if out2 != nil && out2[rep] == ItemNone {
							break // placed nothing; no leaf
						}
					} else if out2 != nil {
						out2[rep] = item
					}
				}
				if itemtype == 0 && mp.isOut(item) {
					break
				}
				out[rep] = item
				left--
				break
			}
		}
	}
	for rep := outpos; rep < endpos; rep++ {
		if out[rep] == itemUndef {
			out[rep] = ItemNone
		}
		if out2 != nil && out2[rep] == itemUndef {
			out2[rep] = ItemNone
		}
	}
}

// DoRule is crush_do_rule: it maps input x through rule ruleno, returning
// at most maxOut items (devices, buckets, or ItemNone holes for indep
// rules). weights are the per-device reweights in 16.16 fixed point
// (0x10000 = fully in); devices beyond len(weights) are out. args are the
// weight sets to use (see ChooseArgsFor), or nil. A rule that does not
// exist maps to nothing; so does a malformed MSR rule (see DoRuleErr).
func (m *Map) DoRule(ruleno int, x uint32, maxOut int, weights []uint32, args ChooseArgMap) []int32 {
	out, _ := m.DoRuleErr(ruleno, x, maxOut, weights, args)
	return out
}

// DoRuleErr is DoRule that also reports why a mapping is empty: a
// malformed MSR rule (ErrMalformedMSR) or a map that asks for too much
// work (ErrWorkBound). Rules of the MSR types (msr_firstn, msr_indep) run
// Squid's multi-step retry mapper; msr_indep results, like indep ones,
// keep ItemNone holes.
func (m *Map) DoRuleErr(ruleno int, x uint32, maxOut int, weights []uint32, args ChooseArgMap) ([]int32, error) {
	out, _, err := m.doRule(ruleno, x, maxOut, weights, args, MaxWork)
	return out, err
}

// doRule is DoRuleErr with the work bound as a parameter; it also returns
// the work spent.
func (m *Map) doRule(ruleno int, x uint32, maxOut int, weights []uint32, args ChooseArgMap, limit int) ([]int32, int, error) {
	rule := m.Rule(ruleno)
	if rule == nil || maxOut <= 0 {
		return nil, 0, nil
	}
	mp := &mapping{m: m, weights: weights, args: args, x: x, limit: limit}
	var out []int32
	var err error
	if isMSR(rule.Type) {
		out, err = mp.doMSRRule(rule, ruleno, maxOut)
	} else {
		out, err = mp.doClassicRule(rule, ruleno, maxOut)
	}
	return out, mp.work, err
}

// doClassicRule is crush_do_rule for the classic rule types.
func (mp *mapping) doClassicRule(rule *Rule, ruleno, maxOut int) ([]int32, error) {
	m, x := mp.m, mp.x

	resultMax := maxOut
	scratch := make([]int32, 3*resultMax)
	w := scratch[:resultMax]
	o := scratch[resultMax : 2*resultMax]
	c := scratch[2*resultMax:]
	result := make([]int32, 0, resultMax)
	wsize := 0

	t := m.Tunables
	// The original choose_total_tries counted retries, not tries.
	chooseTries := t.ChooseTotalTries + 1
	chooseLeafTries := uint32(0)
	localRetries := t.ChooseLocalTries
	localFallback := t.ChooseLocalFallbackTries
	varyR := uint32(t.ChooseLeafVaryR)
	stable := uint32(t.ChooseLeafStable)

	for _, st := range rule.Steps {
		firstn := false
		switch st.Op {
		case OpTake:
			a := st.Arg1
			if (a >= 0 && a < m.MaxDevices) || (a < 0 && m.Bucket(a) != nil) {
				w[0] = a
				wsize = 1
			}
		case OpSetChooseTries:
			if st.Arg1 > 0 {
				chooseTries = uint32(st.Arg1)
			}
		case OpSetChooseLeafTries:
			if st.Arg1 > 0 {
				chooseLeafTries = uint32(st.Arg1)
			}
		case OpSetChooseLocalTries:
			if st.Arg1 >= 0 {
				localRetries = uint32(st.Arg1)
			}
		case OpSetChooseLocalFallback:
			if st.Arg1 >= 0 {
				localFallback = uint32(st.Arg1)
			}
		case OpSetChooseLeafVaryR:
			if st.Arg1 >= 0 {
				varyR = uint32(st.Arg1)
			}
		case OpSetChooseLeafStable:
			if st.Arg1 >= 0 {
				stable = uint32(st.Arg1)
			}
		case OpChooseLeafFirstN, OpChooseFirstN, OpChooseLeafIndep, OpChooseIndep:
			firstn = st.Op == OpChooseLeafFirstN || st.Op == OpChooseFirstN
			if wsize == 0 {
				break
			}
			recurseToLeaf := st.Op == OpChooseLeafFirstN || st.Op == OpChooseLeafIndep
			osize := 0
			for i := 0; i < wsize; i++ {
				numrep := int(st.Arg1)
				if numrep <= 0 {
					numrep += resultMax
					if numrep <= 0 {
						continue
					}
				}
				b, bi := mp.bucketAt(w[i])
				if b == nil {
					continue // probably ItemNone
				}
				if firstn {
					var recurseTries uint32
					switch {
					case chooseLeafTries != 0:
						recurseTries = chooseLeafTries
					case t.ChooseLeafDescendOnce != 0:
						recurseTries = 1
					default:
						recurseTries = chooseTries
					}
					p := firstnParams{
						tries:         chooseTries,
						recurseTries:  recurseTries,
						localRetries:  localRetries,
						localFallback: localFallback,
						recurseToLeaf: recurseToLeaf,
						varyR:         varyR,
						stable:        stable,
					}
					osize += mp.chooseFirstN(b, bi, numrep, int(st.Arg2), o[osize:], 0,
						resultMax-osize, p, c[osize:], 0)
				} else {
					outSize := numrep
					if resultMax-osize < outSize {
						outSize = resultMax - osize
					}
					leafTries := chooseLeafTries
					if leafTries == 0 {
						leafTries = 1
					}
					mp.chooseIndep(b, bi, outSize, numrep, int(st.Arg2), o[osize:], 0,
						chooseTries, leafTries, recurseToLeaf, c[osize:], 0)
					osize += outSize
				}
			}
			if mp.over {
				return nil, fmt.Errorf("%w (rule %d, input %#x)", ErrWorkBound, ruleno, x)
			}
			if recurseToLeaf {
				copy(o[:osize], c[:osize])
			}
			w, o = o, w
			wsize = osize
		case OpEmit:
			for i := 0; i < wsize && len(result) < resultMax; i++ {
				result = append(result, w[i])
			}
			wsize = 0
		}
	}
	return result, nil
}
