package osdmap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
)

// osdmaptoolDump returns `osdmaptool --dump json` of a map file, or nil
// when Pacific's osdmaptool cannot decode it (maps written by newer
// releases with pool encodings it does not know).
func osdmaptoolDump(t *testing.T, path string) map[string]any {
	t.Helper()
	cmd := exec.Command(needTool(t, "osdmaptool"), "--dump", "json", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if strings.Contains(stderr.String(), "error decoding osdmap") {
			return nil
		}
		t.Fatalf("osdmaptool --dump json %s: %v: %s", path, err, stderr.String())
	}
	// osdmaptool prints nan/inf bare in JSON; none of the fields compared
	// here are floats that can be NaN.
	var d map[string]any
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("osdmaptool --dump json %s: %v", path, err)
	}
	return d
}

// jnum reads a JSON number or a numeric string (Ceph dumps some epochs
// with dump_stream).
func jnum(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	case bool:
		if x {
			return 1
		}
	}
	return 0
}

type differ struct{ diffs []string }

func (d *differ) num(what string, got float64, want any) {
	w := jnum(want)
	if math.Abs(got-w) > 1e-6*math.Max(1, math.Abs(w)) {
		d.diffs = append(d.diffs, fmt.Sprintf("%s = %v, osdmaptool says %v", what, got, want))
	}
}

func (d *differ) str(what, got string, want any) {
	if w, _ := want.(string); got != w {
		d.diffs = append(d.diffs, fmt.Sprintf("%s = %q, osdmaptool says %v", what, got, want))
	}
}

func pgOSDs(osds []int32) string {
	parts := make([]string, len(osds))
	for i, o := range osds {
		parts[i] = strconv.Itoa(int(o))
	}
	return strings.Join(parts, ",")
}

func jsonInts(v any) string {
	arr, _ := v.([]any)
	parts := make([]string, len(arr))
	for i, x := range arr {
		parts[i] = strconv.Itoa(int(jnum(x)))
	}
	return strings.Join(parts, ",")
}

func addrVecJSON(v denc.EntityAddrVec) string {
	parts := make([]string, len(v))
	for i, a := range v {
		addr := strings.TrimPrefix(a.String(), a.Type.String()+":")
		addr = addr[:strings.LastIndexByte(addr, '/')]
		if a.Type == denc.AddrNone {
			addr = "(unrecognized address family 0)"
		}
		parts[i] = fmt.Sprintf("%s/%s/%d", a.Type, addr, a.Nonce)
	}
	return strings.Join(parts, " ")
}

func jsonAddrVec(v any) string {
	obj, _ := v.(map[string]any)
	arr, _ := obj["addrvec"].([]any)
	parts := make([]string, len(arr))
	for i, x := range arr {
		a, _ := x.(map[string]any)
		parts[i] = fmt.Sprintf("%v/%v/%d", a["type"], a["addr"], int64(jnum(a["nonce"])))
	}
	return strings.Join(parts, " ")
}

func intervalsJSON(m map[int64]Intervals) string {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d:", id)
		for _, iv := range m[id] {
			fmt.Fprintf(&b, "[%d+%d]", iv.Start, iv.Len)
		}
		b.WriteByte(';')
	}
	return b.String()
}

func jsonIntervals(v any) string {
	arr, _ := v.([]any)
	var b strings.Builder
	for _, x := range arr {
		p, _ := x.(map[string]any)
		fmt.Fprintf(&b, "%d:", int64(jnum(p["pool"])))
		snaps, _ := p["snaps"].([]any)
		for _, s := range snaps {
			iv, _ := s.(map[string]any)
			fmt.Fprintf(&b, "[%d+%d]", uint64(jnum(iv["begin"])), uint64(jnum(iv["length"])))
		}
		b.WriteByte(';')
	}
	return b.String()
}

// compareMapWithDump checks a decoded map against osdmaptool's dump.
func compareMapWithDump(m *OSDMap, dump map[string]any) []string {
	var d differ
	d.num("epoch", float64(m.Epoch), dump["epoch"])
	d.str("fsid", m.FSID.String(), dump["fsid"])
	d.num("flags", float64(m.Flags), dump["flags_num"])
	d.num("crush_version", float64(m.CrushVersion), dump["crush_version"])
	d.num("full_ratio", float64(m.FullRatio), dump["full_ratio"])
	d.num("backfillfull_ratio", float64(m.BackfillfullRatio), dump["backfillfull_ratio"])
	d.num("nearfull_ratio", float64(m.NearfullRatio), dump["nearfull_ratio"])
	d.str("cluster_snapshot", m.ClusterSnapshot, dump["cluster_snapshot"])
	d.num("pool_max", float64(m.PoolMax), dump["pool_max"])
	d.num("max_osd", float64(m.MaxOSD), dump["max_osd"])

	pools, _ := dump["pools"].([]any)
	if len(pools) != len(m.Pools) {
		d.diffs = append(d.diffs, fmt.Sprintf("%d pools, osdmaptool says %d", len(m.Pools), len(pools)))
	}
	for _, x := range pools {
		jp, _ := x.(map[string]any)
		id := int64(jnum(jp["pool"]))
		p := m.Pools[id]
		if p == nil {
			d.diffs = append(d.diffs, fmt.Sprintf("pool %d missing", id))
			continue
		}
		w := fmt.Sprintf("pool %d ", id)
		d.str(w+"name", m.PoolNames[id], jp["pool_name"])
		for name, got := range map[string]float64{
			"flags": float64(p.Flags), "type": float64(p.Type), "size": float64(p.Size),
			"min_size": float64(p.MinSize), "crush_rule": float64(p.CrushRule),
			"object_hash": float64(p.ObjectHash), "pg_num": float64(p.PGNum),
			"pg_placement_num": float64(p.PGPNum), "pg_num_target": float64(p.PGNumTarget),
			"pg_placement_num_target": float64(p.PGPNumTarget), "pg_num_pending": float64(p.PGNumPending),
			"last_change": float64(p.LastChange), "snap_seq": float64(p.SnapSeq),
			"snap_epoch": float64(p.SnapEpoch), "auid": float64(p.AUID),
			"quota_max_bytes": float64(p.QuotaMaxBytes), "quota_max_objects": float64(p.QuotaMaxObjects),
			"tier_of": float64(p.TierOf), "read_tier": float64(p.ReadTier), "write_tier": float64(p.WriteTier),
			"target_max_bytes": float64(p.TargetMaxBytes), "target_max_objects": float64(p.TargetMaxObjects),
			"cache_target_dirty_ratio_micro":        float64(p.CacheTargetDirtyRatioMicro),
			"cache_target_dirty_high_ratio_micro":   float64(p.CacheTargetDirtyHighRatioMicro),
			"cache_target_full_ratio_micro":         float64(p.CacheTargetFullRatioMicro),
			"cache_min_flush_age":                   float64(p.CacheMinFlushAge),
			"cache_min_evict_age":                   float64(p.CacheMinEvictAge),
			"hit_set_period":                        float64(p.HitSetPeriod),
			"hit_set_count":                         float64(p.HitSetCount),
			"use_gmt_hitset":                        b2f(p.UseGMTHitSet),
			"min_read_recency_for_promote":          float64(p.MinReadRecencyForPromote),
			"min_write_recency_for_promote":         float64(p.MinWriteRecencyForPromote),
			"hit_set_grade_decay_rate":              float64(p.HitSetGradeDecayRate),
			"hit_set_search_last_n":                 float64(p.HitSetSearchLastN),
			"stripe_width":                          float64(p.StripeWidth),
			"expected_num_objects":                  float64(p.ExpectedNumObjects),
			"fast_read":                             b2f(p.FastRead),
			"last_force_op_resend":                  float64(p.LastForceOpResend),
			"last_force_op_resend_prenautilus":      float64(p.LastForceOpResendPrenautilus),
			"last_force_op_resend_preluminous":      float64(p.LastForceOpResendPreluminous),
			"peering_crush_bucket_count":            float64(p.PeeringCrushBucketCount),
			"peering_crush_bucket_target":           float64(p.PeeringCrushBucketTarget),
			"peering_crush_bucket_barrier":          float64(p.PeeringCrushBucketBarrier),
			"peering_crush_bucket_mandatory_member": float64(p.PeeringCrushMandatoryMember),
		} {
			if _, ok := jp[name]; ok {
				d.num(w+name, got, jp[name])
			}
		}
		d.str(w+"erasure_code_profile", p.ErasureCodeProfile, jp["erasure_code_profile"])
		if snaps, _ := jp["pool_snaps"].([]any); len(snaps) != len(p.Snaps) {
			d.diffs = append(d.diffs, fmt.Sprintf("%d%d pool snaps, osdmaptool says %d", id, len(p.Snaps), len(snaps)))
		}
		tiers, _ := jp["tiers"].([]any)
		if len(tiers) != len(p.Tiers) {
			d.diffs = append(d.diffs, fmt.Sprintf("%stiers %v, osdmaptool says %v", w, p.Tiers, tiers))
		}
		if opts, _ := jp["options"].(map[string]any); len(opts) != len(p.Opts) {
			d.diffs = append(d.diffs, fmt.Sprintf("%s%d options, osdmaptool says %d", w, len(p.Opts), len(opts)))
		}
		apps, _ := jp["application_metadata"].(map[string]any)
		if len(apps) != len(p.ApplicationMetadata) {
			d.diffs = append(d.diffs, fmt.Sprintf("%sapplications %v, osdmaptool says %v", w, p.ApplicationMetadata, apps))
		}
		for app, kv := range apps {
			got, ok := p.ApplicationMetadata[app]
			kvm, _ := kv.(map[string]any)
			if !ok || len(got) != len(kvm) {
				d.diffs = append(d.diffs, fmt.Sprintf("%sapplication %s = %v, osdmaptool says %v", w, app, got, kv))
			}
		}
	}

	osds, _ := dump["osds"].([]any)
	nexist := 0
	for i := int32(0); i < m.MaxOSD; i++ {
		if m.Exists(i) {
			nexist++
		}
	}
	if nexist != len(osds) {
		d.diffs = append(d.diffs, fmt.Sprintf("%d existing osds, osdmaptool says %d", nexist, len(osds)))
	}
	for _, x := range osds {
		jo, _ := x.(map[string]any)
		o := int32(jnum(jo["osd"]))
		w := fmt.Sprintf("osd.%d ", o)
		if !m.Exists(o) {
			d.diffs = append(d.diffs, w+"does not exist")
			continue
		}
		d.str(w+"uuid", m.OSDUUID[o].String(), jo["uuid"])
		d.num(w+"up", b2f(m.IsUp(o)), jo["up"])
		d.num(w+"in", b2f(m.IsIn(o)), jo["in"])
		d.num(w+"weight", float64(float32(m.Weight(o))/float32(WeightIn)), jo["weight"])
		d.num(w+"primary_affinity", float64(float32(m.Affinity(o))/float32(DefaultPrimaryAffinity)), jo["primary_affinity"])
		info := m.OSDInfo[o]
		d.num(w+"up_from", float64(info.UpFrom), jo["up_from"])
		d.num(w+"up_thru", float64(info.UpThru), jo["up_thru"])
		d.num(w+"down_at", float64(info.DownAt), jo["down_at"])
		d.num(w+"lost_at", float64(info.LostAt), jo["lost_at"])
		d.num(w+"last_clean_begin", float64(info.LastCleanBegin), jo["last_clean_begin"])
		d.num(w+"last_clean_end", float64(info.LastCleanEnd), jo["last_clean_end"])
		for name, vec := range map[string]denc.EntityAddrVec{
			"public_addrs": m.ClientAddrs[o], "cluster_addrs": m.ClusterAddrs[o],
			"heartbeat_back_addrs": m.HBBackAddrs[o], "heartbeat_front_addrs": m.HBFrontAddrs[o],
		} {
			if got, want := addrVecJSON(vec), jsonAddrVec(jo[name]); got != want {
				d.diffs = append(d.diffs, fmt.Sprintf("%s%s = %s, osdmaptool says %s", w, name, got, want))
			}
		}
	}
	xinfos, _ := dump["osd_xinfo"].([]any)
	for _, x := range xinfos {
		jx, _ := x.(map[string]any)
		o := int32(jnum(jx["osd"]))
		if o < 0 || int(o) >= len(m.OSDXInfo) {
			d.diffs = append(d.diffs, fmt.Sprintf("xinfo for osd.%d missing", o))
			continue
		}
		xi := m.OSDXInfo[o]
		w := fmt.Sprintf("osd.%d xinfo ", o)
		d.num(w+"laggy_interval", float64(xi.LaggyInterval), jx["laggy_interval"])
		d.num(w+"features", float64(xi.Features), jx["features"])
		d.num(w+"old_weight", float64(xi.OldWeight), jx["old_weight"])
		d.num(w+"dead_epoch", float64(xi.DeadEpoch), jx["dead_epoch"])
		d.num(w+"laggy_probability", float64(float32(xi.LaggyProbability)/float32(0xffffffff)), jx["laggy_probability"])
	}

	listed := func(name string, n int) []any {
		arr, _ := dump[name].([]any)
		if len(arr) != n {
			d.diffs = append(d.diffs, fmt.Sprintf("%s has %d entries, osdmaptool says %d", name, n, len(arr)))
		}
		return arr
	}
	for _, x := range listed("pg_upmap", len(m.PGUpmap)) {
		e, _ := x.(map[string]any)
		pg, _ := denc.ParsePG(e["pgid"].(string))
		if got, want := pgOSDs(m.PGUpmap[pg]), jsonInts(e["osds"]); got != want {
			d.diffs = append(d.diffs, fmt.Sprintf("pg_upmap %v = %s, want %s", pg, got, want))
		}
	}
	for _, x := range listed("pg_upmap_items", len(m.PGUpmapItems)) {
		e, _ := x.(map[string]any)
		pg, _ := denc.ParsePG(e["pgid"].(string))
		maps, _ := e["mappings"].([]any)
		items := m.PGUpmapItems[pg]
		if len(items) != len(maps) {
			d.diffs = append(d.diffs, fmt.Sprintf("pg_upmap_items %v: %d items, want %d", pg, len(items), len(maps)))
			continue
		}
		for i, mm := range maps {
			it, _ := mm.(map[string]any)
			if int32(jnum(it["from"])) != items[i].From || int32(jnum(it["to"])) != items[i].To {
				d.diffs = append(d.diffs, fmt.Sprintf("pg_upmap_items %v item %d differs", pg, i))
			}
		}
	}
	for _, x := range listed("pg_temp", len(m.PGTemp)) {
		e, _ := x.(map[string]any)
		pg, _ := denc.ParsePG(e["pgid"].(string))
		if got, want := pgOSDs(m.PGTemp[pg]), jsonInts(e["osds"]); got != want {
			d.diffs = append(d.diffs, fmt.Sprintf("pg_temp %v = %s, want %s", pg, got, want))
		}
	}
	// primary_temp is dumped as a flat list of alternating pgid and osd.
	pt, _ := dump["primary_temp"].([]any)
	if len(pt) != 2*len(m.PrimaryTemp) {
		d.diffs = append(d.diffs, fmt.Sprintf("%d primary_temp entries, osdmaptool lists %d values", len(m.PrimaryTemp), len(pt)))
	}
	if bl, _ := dump["blocklist"].(map[string]any); len(bl) != len(m.Blocklist) {
		d.diffs = append(d.diffs, fmt.Sprintf("%d blocklist entries, osdmaptool says %d", len(m.Blocklist), len(bl)))
	}
	profiles, _ := dump["erasure_code_profiles"].(map[string]any)
	if len(profiles) != len(m.ErasureCodeProfiles) {
		d.diffs = append(d.diffs, fmt.Sprintf("%d erasure code profiles, osdmaptool says %d", len(m.ErasureCodeProfiles), len(profiles)))
	}
	for name, kv := range profiles {
		kvm, _ := kv.(map[string]any)
		for k, v := range kvm {
			if m.ErasureCodeProfiles[name][k] != v {
				d.diffs = append(d.diffs, fmt.Sprintf("profile %s %s = %q, want %v", name, k, m.ErasureCodeProfiles[name][k], v))
			}
		}
	}
	for name, got := range map[string]map[int64]Intervals{
		"removed_snaps_queue": m.RemovedSnapsQueue, "new_removed_snaps": m.NewRemovedSnaps,
		"new_purged_snaps": m.NewPurgedSnaps,
	} {
		if g, w := intervalsJSON(got), jsonIntervals(dump[name]); g != w {
			d.diffs = append(d.diffs, fmt.Sprintf("%s = %s, osdmaptool says %s", name, g, w))
		}
	}
	if sm, ok := dump["stretch_mode"].(map[string]any); ok {
		d.num("stretch_mode_enabled", b2f(m.StretchModeEnabled), sm["stretch_mode_enabled"])
		d.num("stretch_bucket_count", float64(m.StretchBucketCount), sm["stretch_bucket_count"])
		d.num("degraded_stretch_mode", float64(m.DegradedStretchMode), sm["degraded_stretch_mode"])
		d.num("recovering_stretch_mode", float64(m.RecoveringStretchMode), sm["recovering_stretch_mode"])
		d.num("stretch_mode_bucket", float64(m.StretchModeBucket), sm["stretch_mode_bucket"])
	}
	return d.diffs
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
