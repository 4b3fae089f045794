package crush

import "sort"

// Map is a decoded CRUSH map. Buckets and Rules are indexed as Ceph
// indexes them: bucket id -1-i lives at Buckets[i], rule id r at Rules[r];
// absent entries are nil.
type Map struct {
	Buckets []*Bucket
	Rules   []*Rule

	// MaxDevices is one more than the highest device id named or placed in
	// any bucket, as Ceph recomputes it after decoding (the encoded value is
	// ignored, exactly as Ceph ignores it).
	MaxDevices int32

	Types     map[int32]string // type id -> name
	Names     map[int32]string // item id -> name
	RuleNames map[int32]string // rule id -> name

	Tunables Tunables

	ClassMap    map[int32]int32           // item id -> class id
	ClassNames  map[int32]string          // class id -> name
	ClassBucket map[int32]map[int32]int32 // bucket id -> class id -> shadow bucket id

	// ChooseArgs holds weight sets keyed by pool id (or DefaultChooseArgs).
	ChooseArgs map[int64]ChooseArgMap

	// uniformRules is true when every rule's legacy ruleset equals its id.
	uniformRules bool
}

// Tunables are the map-wide knobs of the mapper.
type Tunables struct {
	ChooseLocalTries         uint32
	ChooseLocalFallbackTries uint32
	ChooseTotalTries         uint32
	ChooseLeafDescendOnce    uint32
	ChooseLeafVaryR          uint8
	ChooseLeafStable         uint8
	StrawCalcVersion         uint8
	AllowedBucketAlgs        uint32
	MSRDescents              uint32
	MSRCollisionTries        uint32
}

// LegacyTunables are the values a map without tunables decodes to
// (Ceph's argonaut profile).
func LegacyTunables() Tunables {
	return Tunables{
		ChooseLocalTries:         2,
		ChooseLocalFallbackTries: 5,
		ChooseTotalTries:         19,
		AllowedBucketAlgs:        legacyAllowedBucketAlgs,
		MSRDescents:              100,
		MSRCollisionTries:        100,
	}
}

// Bucket is one interior node of the hierarchy.
type Bucket struct {
	ID     int32
	Type   uint16
	Alg    uint8
	Hash   uint8
	Weight uint32 // 16.16 fixed point
	Items  []int32

	// Per-algorithm data; only the slices of Alg are set.
	ItemWeight  uint32   // uniform: weight of every item
	ItemWeights []uint32 // list, straw, straw2: per item
	SumWeights  []uint32 // list
	Straws      []uint32 // straw
	NodeWeights []uint32 // tree: NumNodes entries
}

// ItemWeightAt returns the 16.16 weight of the item at position pos.
func (b *Bucket) ItemWeightAt(pos int) uint32 {
	if pos < 0 || pos >= len(b.Items) {
		return 0
	}
	switch b.Alg {
	case AlgUniform:
		return b.ItemWeight
	case AlgList, AlgStraw, AlgStraw2:
		return b.ItemWeights[pos]
	case AlgTree:
		n := treeNode(pos)
		if n < len(b.NodeWeights) {
			return b.NodeWeights[n]
		}
	}
	return 0
}

// treeNode is the node index of the leaf holding item i in a tree bucket.
func treeNode(i int) int { return ((i + 1) << 1) - 1 }

// Rule is a placement rule: a program of steps.
type Rule struct {
	ID      int
	Ruleset uint8 // legacy mask field; equal to ID in modern maps
	Type    uint8
	MinSize uint8
	MaxSize uint8
	Steps   []Step
}

// Step is one rule instruction.
type Step struct {
	Op   uint32
	Arg1 int32
	Arg2 int32
}

// ChooseArgMap holds, by bucket index (-1-id), replacement weights and
// ids for straw2 buckets; buckets without an entry use their own. It is
// a map, not a slice of every bucket as Ceph keeps it: a choose_args
// entry of a few bytes must not cost an array of the whole map's buckets.
type ChooseArgMap map[int]ChooseArg

// ChooseArg replaces a straw2 bucket's weights (one set per replica
// position, the last one repeating) and optionally the ids fed to the hash.
// A weight set shorter than the bucket weighs its missing items 0, as
// Ceph's padding of such sets with zeros does.
type ChooseArg struct {
	WeightSets [][]uint32
	IDs        []int32
}

// Bucket returns the bucket with the given (negative) id, or nil.
func (m *Map) Bucket(id int32) *Bucket {
	i := -1 - int64(id)
	if i < 0 || i >= int64(len(m.Buckets)) {
		return nil
	}
	return m.Buckets[i]
}

// Rule returns rule id r, or nil.
func (m *Map) Rule(r int) *Rule {
	if r < 0 || r >= len(m.Rules) {
		return nil
	}
	return m.Rules[r]
}

// RuleByName returns the id of the rule with the given name.
func (m *Map) RuleByName(name string) (int, bool) {
	for id, n := range m.RuleNames {
		if n == name && m.Rule(int(id)) != nil {
			return int(id), true
		}
	}
	return -1, false
}

// ItemByName returns the id of the device or bucket with the given name.
func (m *Map) ItemByName(name string) (int32, bool) {
	ids := make([]int32, 0, len(m.Names))
	for id, n := range m.Names {
		if n == name {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, false
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids[0], true
}

// ItemPresent reports whether a device or bucket id appears in any bucket
// (Ceph's check_item_present).
func (m *Map) ItemPresent(id int32) bool {
	for _, b := range m.Buckets {
		if b == nil {
			continue
		}
		for _, it := range b.Items {
			if it == id {
				return true
			}
		}
	}
	return false
}

// PresentWeights returns a reweight vector of MaxDevices entries: fully in
// (0x10000) for every device some bucket holds, 0 for the rest, as
// crushtool's tester starts from.
func (m *Map) PresentWeights() []uint32 {
	w := make([]uint32, m.MaxDevices)
	for _, b := range m.Buckets {
		if b == nil {
			continue
		}
		for _, it := range b.Items {
			if it >= 0 && it < m.MaxDevices {
				w[it] = 0x10000
			}
		}
	}
	return w
}

// ItemWeight returns the 16.16 CRUSH weight of an item as the first bucket
// holding it records it (Ceph's get_item_weight), and false if no bucket
// holds it.
func (m *Map) ItemWeight(id int32) (uint32, bool) {
	for _, b := range m.Buckets {
		if b == nil {
			continue
		}
		for pos, it := range b.Items {
			if it == id {
				return b.ItemWeightAt(pos), true
			}
		}
	}
	return 0, false
}

// FindRule returns the rule id to use for a pool, following Pacific's
// CrushWrapper::find_rule: the rule whose id equals ruleset when rulesets
// are uniform and its type and size bounds match, otherwise the first rule
// whose legacy ruleset, type and size bounds match; -1 if none. A rule of
// an MSR type matches pools of any type: only Squid and later write them,
// and those use the pool's rule id as it is.
func (m *Map) FindRule(ruleset, ruleType, size int) int {
	matches := func(r *Rule) bool {
		return (int(r.Type) == ruleType || isMSR(r.Type)) &&
			int(r.MinSize) <= size && int(r.MaxSize) >= size
	}
	if m.uniformRules {
		if r := m.Rule(ruleset); r != nil && matches(r) {
			return ruleset
		}
	}
	for i, r := range m.Rules {
		if r != nil && int(r.Ruleset) == ruleset && matches(r) {
			return i
		}
	}
	return -1
}

// ChooseArgsFor returns the weight sets for a pool, falling back to the
// default set, or nil when the map has neither (Ceph's
// choose_args_get_with_fallback).
func (m *Map) ChooseArgsFor(index int64) ChooseArgMap {
	if a, ok := m.ChooseArgs[index]; ok {
		return a
	}
	return m.ChooseArgs[DefaultChooseArgs]
}
