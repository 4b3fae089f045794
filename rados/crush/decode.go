package crush

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/purerbd/purerbd/rados/denc"
)

// ErrBadMagic is returned for input that does not start with CRUSH's
// magic number.
var ErrBadMagic = errors.New("crush: bad magic number")

// Decode parses a CrushWrapper encoding (as stored in an OSDMap, written by
// `crushtool -o` or `ceph osd getcrushmap`). Trailing bytes after the last
// field this decoder knows are ignored, as Ceph ignores them.
func Decode(b []byte) (*Map, error) {
	d := denc.NewDecoder(b)
	m := decodeMap(d)
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("crush: decode map: %w", err)
	}
	if err := m.finish(); err != nil {
		return nil, err
	}
	return m, nil
}

func decodeMap(d *denc.Decoder) *Map {
	m := &Map{Tunables: LegacyTunables()}
	magic := d.U32("magic")
	if d.Err() != nil {
		return m
	}
	if magic != crushMagic {
		d.Fail("magic", fmt.Errorf("%w: %#x", ErrBadMagic, magic))
		return m
	}
	maxBuckets := d.I32("max_buckets")
	maxRules := d.U32("max_rules")
	d.I32("max_devices") // recomputed in finish, as Ceph does
	if d.Err() != nil {
		return m
	}
	// Every bucket slot takes at least its 4-byte algorithm word.
	if maxBuckets < 0 || int64(maxBuckets)*4 > int64(d.Remaining()) {
		d.Failf("max_buckets", "%d buckets cannot fit in %d bytes", maxBuckets, d.Remaining())
		return m
	}
	m.Buckets = make([]*Bucket, maxBuckets)
	for i := range m.Buckets {
		m.Buckets[i] = decodeBucket(d)
		if d.Err() != nil {
			return m
		}
	}
	if int64(maxRules)*4 > int64(d.Remaining()) {
		d.Failf("max_rules", "%d rules cannot fit in %d bytes", maxRules, d.Remaining())
		return m
	}
	m.Rules = make([]*Rule, maxRules)
	for i := range m.Rules {
		m.Rules[i] = decodeRule(d, i)
		if d.Err() != nil {
			return m
		}
	}
	m.Types = decodeNameMap(d, "type_map")
	m.Names = decodeNameMap(d, "name_map")
	m.RuleNames = decodeNameMap(d, "rule_name_map")

	t := &m.Tunables
	if d.Remaining() > 0 {
		t.ChooseLocalTries = d.U32("choose_local_tries")
		t.ChooseLocalFallbackTries = d.U32("choose_local_fallback_tries")
		t.ChooseTotalTries = d.U32("choose_total_tries")
	}
	if d.Remaining() > 0 {
		t.ChooseLeafDescendOnce = d.U32("chooseleaf_descend_once")
	}
	if d.Remaining() > 0 {
		t.ChooseLeafVaryR = d.U8("chooseleaf_vary_r")
	}
	if d.Remaining() > 0 {
		t.StrawCalcVersion = d.U8("straw_calc_version")
	}
	if d.Remaining() > 0 {
		t.AllowedBucketAlgs = d.U32("allowed_bucket_algs")
	}
	if d.Remaining() > 0 {
		t.ChooseLeafStable = d.U8("chooseleaf_stable")
	}
	if d.Remaining() > 0 {
		m.ClassMap = denc.Map(d, "class_map", 8, func(d *denc.Decoder) (int32, int32) {
			return d.I32("class_map item"), d.I32("class_map class")
		})
		m.ClassNames = denc.Map(d, "class_name", 8, func(d *denc.Decoder) (int32, string) {
			return d.I32("class id"), d.String("class name")
		})
		m.ClassBucket = denc.Map(d, "class_bucket", 8, func(d *denc.Decoder) (int32, map[int32]int32) {
			id := d.I32("class_bucket bucket")
			return id, denc.Map(d, "class_bucket classes", 8, func(d *denc.Decoder) (int32, int32) {
				return d.I32("class_bucket class"), d.I32("class_bucket shadow")
			})
		})
	}
	if d.Remaining() > 0 {
		m.ChooseArgs = decodeChooseArgs(d, m.Buckets)
	}
	if d.Remaining() > 0 {
		t.MSRDescents = d.U32("msr_descents")
		t.MSRCollisionTries = d.U32("msr_collision_tries")
	}
	return m
}

func decodeBucket(d *denc.Decoder) *Bucket {
	alg := d.U32("bucket alg")
	if d.Err() != nil || alg == 0 {
		return nil
	}
	if alg < AlgUniform || alg > AlgStraw2 {
		d.Failf("bucket alg", "unsupported bucket algorithm %d", alg)
		return nil
	}
	b := &Bucket{
		ID:     d.I32("bucket id"),
		Type:   d.U16("bucket type"),
		Alg:    d.U8("bucket alg"),
		Hash:   d.U8("bucket hash"),
		Weight: d.U32("bucket weight"),
	}
	n := d.Count("bucket size", 4)
	if d.Err() != nil {
		return nil
	}
	if uint32(b.Alg) != alg {
		// Ceph switches on the inner byte for the per-item data.
		if b.Alg < AlgUniform || b.Alg > AlgStraw2 {
			d.Failf("bucket alg", "bucket %d: unsupported inner algorithm %d", b.ID, b.Alg)
			return nil
		}
	}
	b.Items = make([]int32, n)
	for j := range b.Items {
		b.Items[j] = d.I32("bucket item")
	}
	switch b.Alg {
	case AlgUniform:
		b.ItemWeight = d.U32("uniform item_weight")
	case AlgList:
		if n*8 > d.Remaining() {
			d.Failf("list weights", "bucket %d: %d items cannot fit", b.ID, n)
			return nil
		}
		b.ItemWeights = make([]uint32, n)
		b.SumWeights = make([]uint32, n)
		for j := 0; j < n; j++ {
			b.ItemWeights[j] = d.U32("list item_weight")
			b.SumWeights[j] = d.U32("list sum_weight")
		}
	case AlgTree:
		nodes := int(d.U8("tree num_nodes"))
		if nodes*4 > d.Remaining() {
			d.Failf("tree node_weights", "bucket %d: %d nodes cannot fit", b.ID, nodes)
			return nil
		}
		b.NodeWeights = make([]uint32, nodes)
		for j := range b.NodeWeights {
			b.NodeWeights[j] = d.U32("tree node_weight")
		}
	case AlgStraw:
		if n*8 > d.Remaining() {
			d.Failf("straw weights", "bucket %d: %d items cannot fit", b.ID, n)
			return nil
		}
		b.ItemWeights = make([]uint32, n)
		b.Straws = make([]uint32, n)
		for j := 0; j < n; j++ {
			b.ItemWeights[j] = d.U32("straw item_weight")
			b.Straws[j] = d.U32("straw straw")
		}
	case AlgStraw2:
		if n*4 > d.Remaining() {
			d.Failf("straw2 weights", "bucket %d: %d items cannot fit", b.ID, n)
			return nil
		}
		b.ItemWeights = make([]uint32, n)
		for j := range b.ItemWeights {
			b.ItemWeights[j] = d.U32("straw2 item_weight")
		}
	}
	if d.Err() != nil {
		return nil
	}
	return b
}

func decodeRule(d *denc.Decoder, id int) *Rule {
	if d.U32("rule present") == 0 {
		return nil
	}
	n := d.Count("rule len", 12)
	r := &Rule{
		ID:      id,
		Ruleset: d.U8("rule ruleset"),
		Type:    d.U8("rule type"),
		MinSize: d.U8("rule min_size"),
		MaxSize: d.U8("rule max_size"),
	}
	if d.Err() != nil {
		return nil
	}
	r.Steps = make([]Step, n)
	for j := range r.Steps {
		r.Steps[j] = Step{Op: d.U32("step op"), Arg1: d.I32("step arg1"), Arg2: d.I32("step arg2")}
	}
	return r
}

// decodeNameMap reads a map<int32,string> whose keys some old encoders
// wrote as 64-bit integers: a zero length means the length follows (Ceph's
// decode_32_or_64_string_map; names are never empty).
func decodeNameMap(d *denc.Decoder, what string) map[int32]string {
	n := d.Count(what, 8)
	if d.Err() != nil {
		return nil
	}
	m := make(map[int32]string, n)
	for i := 0; i < n; i++ {
		key := d.I32(what + " key")
		l := d.U32(what + " length")
		if l == 0 {
			l = d.U32(what + " length")
		}
		if d.Err() != nil {
			return nil
		}
		if uint64(l) > uint64(d.Remaining()) {
			d.Failf(what, "name of %d bytes exceeds remaining %d", l, d.Remaining())
			return nil
		}
		m[key] = string(d.Raw(what+" name", int(l)))
	}
	return m
}

func decodeChooseArgs(d *denc.Decoder, buckets []*Bucket) map[int64]ChooseArgMap {
	n := d.Count("choose_args", 12)
	if d.Err() != nil {
		return nil
	}
	out := make(map[int64]ChooseArgMap, n)
	for i := 0; i < n; i++ {
		index := d.I64("choose_args index")
		cnt := d.Count("choose_args buckets", 12)
		args := make(ChooseArgMap, cnt)
		for j := 0; j < cnt && d.Err() == nil; j++ {
			bi := d.U32("choose_args bucket index")
			if d.Err() != nil {
				break
			}
			if uint64(bi) >= uint64(len(buckets)) {
				d.Failf("choose_args bucket index", "index %d beyond %d buckets", bi, len(buckets))
				break
			}
			var arg ChooseArg
			positions := d.Count("weight_set positions", 4)
			if positions > 0 {
				arg.WeightSets = make([][]uint32, positions)
				for k := range arg.WeightSets {
					sz := d.Count("weight_set size", 4)
					if d.Err() != nil {
						break
					}
					ws := make([]uint32, sz)
					for l := range ws {
						ws[l] = d.U32("weight_set weight")
					}
					arg.WeightSets[k] = ws
				}
			}
			ids := d.Count("choose_args ids", 4)
			if d.Err() != nil {
				break
			}
			if ids > 0 {
				if buckets[bi] == nil || ids != len(buckets[bi].Items) {
					d.Failf("choose_args ids", "bucket index %d: %d ids do not match the bucket", bi, ids)
					break
				}
				arg.IDs = make([]int32, ids)
				for k := range arg.IDs {
					arg.IDs[k] = d.I32("choose_args id")
				}
			}
			args[int(bi)] = arg
		}
		if d.Err() != nil {
			return nil
		}
		out[index] = args
	}
	return out
}

// finish does what Ceph does after decoding: drop choose_args of buckets
// that are not straw2, cut weight sets longer than their bucket (shorter
// ones weigh the missing items 0, see ChooseArg, which is what Ceph's
// padding with zeros amounts to without allocating it), recompute
// max_devices, and note whether rule ids and rulesets agree.
func (m *Map) finish() error {
	for _, args := range m.ChooseArgs {
		positions := 1
		for _, j := range slices.Sorted(maps.Keys(args)) {
			if a := args[j]; len(a.WeightSets) > 0 {
				positions = len(a.WeightSets)
				break
			}
		}
		for j, a := range args {
			b := m.Buckets[j]
			if b == nil || b.Alg != AlgStraw2 {
				delete(args, j)
				continue
			}
			if len(a.WeightSets) == 0 || len(a.WeightSets) != positions {
				continue
			}
			for p, ws := range a.WeightSets {
				if len(ws) > len(b.Items) {
					a.WeightSets[p] = ws[:len(b.Items):len(b.Items)]
				}
			}
		}
	}
	var maxDev int64
	for _, b := range m.Buckets {
		if b == nil {
			continue
		}
		for _, it := range b.Items {
			if int64(it) >= maxDev {
				maxDev = int64(it) + 1
			}
		}
	}
	for id := range m.Names {
		if int64(id) >= maxDev {
			maxDev = int64(id) + 1
		}
	}
	if maxDev > 1<<31-1 {
		return fmt.Errorf("crush: device id %d out of range", maxDev-1)
	}
	m.MaxDevices = int32(maxDev)
	m.uniformRules = true
	for i, r := range m.Rules {
		if r != nil && int(r.Ruleset) != i {
			m.uniformRules = false
		}
	}
	return nil
}
