package crush

// WorkBound returns an upper bound on the bucket items DoRule may
// weigh to map one input through rule ruleno for maxOut results, as
// Ceph's mapper would: the map alone bounds that work, through the retry
// tunables, the rule's set_choose*_tries steps, its choose steps'
// replica counts (crush_choose_firstn loops over every replica even when
// each is rejected at once) and the bucket sizes (local fallback retries
// scan a whole bucket). A damaged or hostile map can ask for billions;
// callers that map untrusted maps (the fuzz tests) check the bound
// first. The result is a float64 because such products overflow any
// integer; a rule that does not exist, or a malformed MSR rule (which
// DoRule does not run), costs 0.
func (m *Map) WorkBound(ruleno, maxOut int) float64 {
	rule := m.Rule(ruleno)
	if rule == nil || maxOut <= 0 {
		return 0
	}
	// every choice weighs at most the largest bucket's items, and one
	// descent makes at most one choice per bucket (deeper is a cycle)
	items := 1.0
	for _, b := range m.Buckets {
		if b != nil {
			items = max(items, float64(len(b.Items)))
		}
	}
	descent := max(1, float64(len(m.Buckets))) * items
	if isMSR(rule.Type) {
		return m.msrWorkBound(rule, maxOut, descent)
	}

	t := m.Tunables
	tries := float64(t.ChooseTotalTries) + 1
	leafTries := 0.0
	localRetries := float64(t.ChooseLocalTries)
	localFallback := float64(t.ChooseLocalFallbackTries)
	total, wsize := 0.0, 0.0
	for _, st := range rule.Steps {
		switch st.Op {
		case OpTake:
			wsize = 1
		case OpSetChooseTries:
			if st.Arg1 > 0 {
				tries = float64(st.Arg1)
			}
		case OpSetChooseLeafTries:
			if st.Arg1 > 0 {
				leafTries = float64(st.Arg1)
			}
		case OpSetChooseLocalTries:
			if st.Arg1 >= 0 {
				localRetries = float64(st.Arg1)
			}
		case OpSetChooseLocalFallback:
			if st.Arg1 >= 0 {
				localFallback = float64(st.Arg1)
			}
		case OpChooseFirstN, OpChooseLeafFirstN, OpChooseIndep, OpChooseLeafIndep:
			numrep := float64(st.Arg1)
			if st.Arg1 <= 0 {
				numrep += float64(maxOut)
			}
			if numrep <= 0 || wsize == 0 {
				continue
			}
			leaf := st.Op == OpChooseLeafFirstN || st.Op == OpChooseLeafIndep
			if st.Op == OpChooseFirstN || st.Op == OpChooseLeafFirstN {
				// attempts in one bucket before a new descent
				local := localRetries + 1
				if localFallback > 0 {
					local = max(localRetries, items+localFallback) + 1
				}
				recurse := tries
				switch {
				case leafTries != 0:
					recurse = leafTries
				case t.ChooseLeafDescendOnce != 0:
					recurse = 1
				}
				attempt := descent
				if leaf {
					attempt += recurse * local * descent
				}
				total += wsize * numrep * tries * local * attempt
			} else {
				recurse := max(1, leafTries)
				attempt := descent
				if leaf {
					attempt += recurse * descent
				}
				total += wsize * tries * min(numrep, float64(maxOut)) * attempt
			}
			wsize = min(float64(maxOut), wsize*numrep)
		case OpEmit:
			wsize = 0
		}
	}
	return total
}

// msrWorkBound bounds an MSR rule's work: each block makes up to
// msr_descents passes; a pass visits at most one stride per output
// position at each choosemsr step, and each stride makes up to
// msr_collision_tries descents.
func (m *Map) msrWorkBound(rule *Rule, maxOut int, descent float64) float64 {
	plan, err := m.scanMSR(rule, maxOut)
	if err != nil {
		return 0
	}
	total := 0.0
	for _, b := range plan.blocks {
		positions := min(float64(b.children), float64(maxOut))
		steps := float64(b.emit - b.take - 1)
		total += float64(plan.descents) * steps * positions * (1 + float64(plan.collisionTries)*descent)
	}
	return total
}
