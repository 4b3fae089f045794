package crush

import (
	"errors"
	"fmt"
	"math"
)

// ErrMalformedMSR is returned by DoRuleErr for an MSR rule whose steps are
// not of the form Ceph's crush_msr_do_rule accepts — a prefix of
// set_msr_* steps, then blocks of take, choosemsr..., emit — or that Ceph
// itself could not run (a take of a device, a block without choosemsr
// steps, a take of a missing bucket, a negative or overflowing replica
// count). Ceph maps such rules to nothing, or loops or crashes; so does
// DoRule (it returns no items).
var ErrMalformedMSR = errors.New("crush: malformed MSR rule")

// isMSR reports whether a rule type is one of Squid's multi-step retry
// types, which crush_do_rule hands to crush_msr_do_rule.
func isMSR(ruleType uint8) bool {
	return ruleType == RuleTypeMSRFirstN || ruleType == RuleTypeMSRIndep
}

// msrBlock is one take ... emit block of an MSR rule.
type msrBlock struct {
	take, emit int    // step indexes; the choosemsr steps lie between
	children   uint64 // product of the choosemsr counts (0 counts as maxOut)
}

// msrPlan is a validated MSR rule: its retry limits and its blocks.
type msrPlan struct {
	descents, collisionTries uint32
	blocks                   []msrBlock
}

// scanMSR validates an MSR rule as crush_msr_scan_rule does, with the
// checks Ceph's mapper leaves to chance (it would crash or loop), and
// reads the retry limits: the map's tunables, overridden by the rule's
// leading set_msr_* steps.
func (m *Map) scanMSR(rule *Rule, maxOut int) (msrPlan, error) {
	p := msrPlan{descents: m.Tunables.MSRDescents, collisionTries: m.Tunables.MSRCollisionTries}
	steps := rule.Steps
	i := 0
scanConfig:
	for ; i < len(steps); i++ {
		switch steps[i].Op {
		case OpSetMSRDescents:
			p.descents = uint32(steps[i].Arg1)
		case OpSetMSRCollisionTries:
			p.collisionTries = uint32(steps[i].Arg1)
		default:
			break scanConfig
		}
	}
	for i < len(steps) {
		take := steps[i]
		if take.Op != OpTake {
			return p, fmt.Errorf("step %d is op %d, not take", i, take.Op)
		}
		if take.Arg1 >= 0 {
			// Ceph emits the device without ever leaving the block.
			return p, fmt.Errorf("step %d takes device %d", i, take.Arg1)
		}
		if m.Bucket(take.Arg1) == nil {
			return p, fmt.Errorf("step %d takes missing bucket %d", i, take.Arg1)
		}
		b := msrBlock{take: i, children: 1}
		for i++; i < len(steps) && steps[i].Op != OpEmit; i++ {
			st := steps[i]
			if st.Op != OpChooseMSR {
				return p, fmt.Errorf("step %d is op %d, not choosemsr or emit", i, st.Op)
			}
			n := uint64(st.Arg1)
			switch {
			case st.Arg1 < 0:
				return p, fmt.Errorf("step %d chooses %d items", i, st.Arg1)
			case st.Arg1 == 0:
				n = uint64(maxOut)
			}
			// Ceph multiplies in 32-bit unsigned arithmetic, then adds
			// positions to the product: keep clear of any wrap.
			if b.children *= n; b.children > math.MaxInt32 {
				return p, fmt.Errorf("step %d: block of more than 2^31 items", i)
			}
		}
		if i >= len(steps) {
			return p, fmt.Errorf("block at step %d has no emit", b.take)
		}
		if i == b.take+1 {
			return p, fmt.Errorf("block at step %d has no choosemsr step", b.take)
		}
		b.emit = i
		p.blocks = append(p.blocks, b)
		i++
	}
	return p, nil
}

// msrRun is the state of one crush_msr_do_rule call.
type msrRun struct {
	mp     *mapping
	steps  []Step
	indep  bool
	max    int // result_max
	out    []int32
	placed int // results emitted so far

	plan msrPlan

	// The current block's workspace: chosen[s-first][pos] is the item
	// step s chose for output position pos (itemUndef if none), which is
	// what collisions are checked against; first is the block's first
	// choosemsr step.
	first  int
	chosen [][]int32
	// undo[s-first][stride] is the item pushed for a stride of step s
	// that led to no result, removed when the step's pass ends.
	undo [][]int32
}

// doMSRRule is crush_msr_do_rule. Each block maps its positions by
// depth-first descents (crush_msr_choose) retried up to msr_descents
// times, so that an out device is replaced anywhere the rule allows, not
// only below the bucket that held it.
func (mp *mapping) doMSRRule(rule *Rule, ruleno, maxOut int) ([]int32, error) {
	plan, err := mp.m.scanMSR(rule, maxOut)
	if err != nil {
		return nil, fmt.Errorf("%w (rule %d): %v", ErrMalformedMSR, ruleno, err)
	}
	run := &msrRun{
		mp:    mp,
		steps: rule.Steps,
		indep: rule.Type == RuleTypeMSRIndep,
		max:   maxOut,
		out:   make([]int32, maxOut),
		plan:  plan,
	}
	for i := range run.out {
		run.out[i] = ItemNone
	}
	start := 0
	for _, b := range plan.blocks {
		end := min(start+int(b.children), maxOut)
		if end <= start {
			continue
		}
		run.startBlock(b)
		root, bi := run.mp.bucketAt(rule.Steps[b.take].Arg1)
		limit := run.placed + end - start
		for try := uint32(0); try < plan.descents && run.placed < limit; try++ {
			run.choose(root, bi, int(b.children), start, end, b.take+1, b.emit, try)
			if run.mp.over {
				return nil, fmt.Errorf("%w (rule %d, input %#x)", ErrWorkBound, ruleno, mp.x)
			}
		}
		start = end
	}
	if run.indep {
		return run.out, nil
	}
	return run.out[:run.placed], nil
}

// startBlock clears the workspace for a block.
func (r *msrRun) startBlock(b msrBlock) {
	r.first = b.take + 1
	n := b.emit - r.first
	for len(r.chosen) < n {
		r.chosen = append(r.chosen, make([]int32, r.max))
		r.undo = append(r.undo, make([]int32, r.max))
	}
	for s := range n {
		for i := range r.chosen[s] {
			r.chosen[s][i] = itemUndef
		}
	}
}

// choose is crush_msr_choose: it fills output positions [start, end)
// below bucket with the choosemsr steps [step, emit), splitting the
// positions into strides, one per item the step chooses (choosemsr 4
// host over 8 positions: 4 strides of 2). Strides never share an item of
// the step; a stride may hold several once out devices moved its
// positions elsewhere. It returns how many results it emitted.
func (r *msrRun) choose(bucket *Bucket, bi, descendants, start, end, step, emit int, try uint32) int {
	st := r.steps[step]
	strides := int(st.Arg1)
	if strides == 0 {
		strides = r.max
	}
	strideLen := descendants / strides
	vec := r.chosen[step-r.first]
	undo := r.undo[step-r.first]
	mapped := 0
	stride := 0
	for ss := start; ss < end; ss, stride = ss+strideLen, stride+1 {
		undo[stride] = itemUndef
		se := min(ss+strideLen, end)
		if !r.mp.charge(1) {
			return mapped
		}
		if r.leavesPlaced(ss, se, emit) {
			continue
		}
		var item int32
		found := false
		for local := uint32(0); local < r.plan.collisionTries; local++ {
			var ok bool
			if item, ok = r.descend(bucket, bi, int(st.Arg2), try, local, stride); !ok {
				break
			}
			if usable(vec, start, end, ss, se, item) {
				found = true
				break
			}
		}
		if r.mp.over {
			return mapped
		}
		if !found {
			continue // collided every time; a later descent may do better
		}
		if st.Arg2 == 0 {
			// A device: only the last step may choose them, one per
			// position.
			if strideLen != 1 || step+1 != emit || r.mp.isOut(item) {
				continue
			}
			push(vec, ss, se, item)
			r.emit(ss, item)
			mapped++
			continue
		}
		child, childIdx := r.mp.bucketAt(item)
		if step+1 >= emit || child == nil {
			// nothing below to choose with, or a device where the step
			// wants a bucket (Ceph would index its buckets with it)
			continue
		}
		got := r.choose(child, childIdx, strideLen, ss, se, step+1, emit, try)
		if push(vec, ss, se, item) && got == 0 {
			undo[stride] = item
		} else {
			mapped += got
		}
	}
	// Forget the items that led nowhere, now rather than at once: until
	// this pass ends they still keep other strides off them.
	for s, ss := 0, start; ss < end; s, ss = s+1, ss+strideLen {
		if undo[s] != itemUndef {
			pop(vec, ss, min(ss+strideLen, end), undo[s])
		}
	}
	return mapped
}

// descend is crush_msr_descend: from bucket, choose down through the
// hierarchy until a device or a bucket of the wanted type. All choices
// use the same draw, set by the descent number, the collision retry and
// the stride. It reports false where Ceph would crash: an empty bucket, a
// missing one, a cycle.
func (r *msrRun) descend(bucket *Bucket, bi, typ int, try, local uint32, stride int) (int32, bool) {
	draw := (try*uint32(r.max)+uint32(stride))<<16 + local
	for depth := 0; ; depth++ {
		if !r.mp.charge(len(bucket.Items)) || len(bucket.Items) == 0 || depth > len(r.mp.m.Buckets) {
			return 0, false
		}
		item := r.mp.ws.bucketChoose(bucket, bi, r.mp.x, int(draw), r.mp.args, stride)
		if item >= 0 {
			return item, true
		}
		if bucket, bi = r.mp.bucketAt(item); bucket == nil {
			return 0, false
		}
		if int(bucket.Type) == typ {
			return item, true
		}
	}
}

// leavesPlaced reports whether every position in [start, end) has its
// result: the last step's vector records them (in FIRSTN order the output
// itself is not by position).
func (r *msrRun) leavesPlaced(start, end, emit int) bool {
	leaves := r.chosen[emit-1-r.first]
	for _, v := range leaves[start:end] {
		if v == itemUndef {
			return false
		}
	}
	return true
}

// emit stores a result: in order of discovery for msr_firstn, at its
// position for msr_indep.
func (r *msrRun) emit(pos int, item int32) {
	if r.placed >= len(r.out) {
		return
	}
	if r.indep {
		r.out[pos] = item
	} else {
		r.out[r.placed] = item
	}
	r.placed++
}

// usable is crush_msr_valid_candidate: an item already chosen in
// [start, end) is usable only by the stride [ss, se) that chose it.
func usable(vec []int32, start, end, ss, se int, item int32) bool {
	for i := start; i < end; i++ {
		if vec[i] == item {
			return i >= ss && i < se
		}
	}
	return true
}

// push records item in the first free slot of a stride unless the stride
// holds it already, and reports whether it added it.
func push(vec []int32, ss, se int, item int32) bool {
	for i := ss; i < se; i++ {
		switch vec[i] {
		case item:
			return false
		case itemUndef:
			vec[i] = item
			return true
		}
	}
	return false
}

// pop removes the item pushed last into a stride.
func pop(vec []int32, ss, se int, item int32) {
	for i := se - 1; i >= ss; i-- {
		if vec[i] != itemUndef {
			if vec[i] == item {
				vec[i] = itemUndef
			}
			return
		}
	}
}
