package crush

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

// crushDump is the part of `crushtool --dump` this test compares.
type crushDump struct {
	Devices []struct {
		ID    int32  `json:"id"`
		Name  string `json:"name"`
		Class string `json:"class"`
	} `json:"devices"`
	Types []struct {
		ID   int32  `json:"type_id"`
		Name string `json:"name"`
	} `json:"types"`
	Buckets []struct {
		ID     int32  `json:"id"`
		Name   string `json:"name"`
		TypeID uint16 `json:"type_id"`
		Weight uint32 `json:"weight"`
		Alg    string `json:"alg"`
		Hash   string `json:"hash"`
		Items  []struct {
			ID     int32  `json:"id"`
			Weight uint32 `json:"weight"`
			Pos    int    `json:"pos"`
		} `json:"items"`
	} `json:"buckets"`
	Rules []struct {
		ID      int    `json:"rule_id"`
		Name    string `json:"rule_name"`
		Ruleset int    `json:"ruleset"`
		Type    int    `json:"type"`
		MinSize int    `json:"min_size"`
		MaxSize int    `json:"max_size"`
		Steps   []struct {
			Op   string `json:"op"`
			Num  *int32 `json:"num"`
			Item *int32 `json:"item"`
			Type string `json:"type"`
		} `json:"steps"`
	} `json:"rules"`
	Tunables   map[string]any `json:"tunables"`
	ChooseArgs map[string][]struct {
		BucketID  int32       `json:"bucket_id"`
		WeightSet [][]float64 `json:"weight_set"`
		IDs       []int32     `json:"ids"`
	} `json:"choose_args"`
}

func crushtoolDump(t *testing.T, path string) *crushDump {
	t.Helper()
	cmd := exec.Command(needTool(t, "crushtool"), "-i", path, "--dump")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crushtool --dump %s: %v: %s", path, err, stderr.String())
	}
	var d crushDump
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("crushtool --dump %s: %v", path, err)
	}
	return &d
}

var stepOpNames = map[uint32]string{
	OpNoop: "noop", OpTake: "take", OpEmit: "emit",
	OpChooseFirstN: "choose_firstn", OpChooseIndep: "choose_indep",
	OpChooseLeafFirstN: "chooseleaf_firstn", OpChooseLeafIndep: "chooseleaf_indep",
	OpSetChooseTries: "set_choose_tries", OpSetChooseLeafTries: "set_chooseleaf_tries",
	OpSetChooseLocalTries: "set_choose_local_tries", OpSetChooseLocalFallback: "set_choose_local_fallback_tries",
	OpSetChooseLeafVaryR: "set_chooseleaf_vary_r", OpSetChooseLeafStable: "set_chooseleaf_stable",
}

// compareWithDump checks a decoded map against crushtool's view of the
// same bytes and returns the differences.
func compareWithDump(m *Map, d *crushDump) []string {
	var diffs []string
	bad := func(f string, a ...any) { diffs = append(diffs, fmt.Sprintf(f, a...)) }

	if len(d.Devices) != int(m.MaxDevices) {
		bad("max_devices %d, crushtool lists %d devices", m.MaxDevices, len(d.Devices))
	}
	for _, dev := range d.Devices {
		name, ok := m.Names[dev.ID]
		if !ok {
			name = "device" + strconv.Itoa(int(dev.ID))
		}
		if name != dev.Name {
			bad("device %d name %q, want %q", dev.ID, name, dev.Name)
		}
		class := ""
		if c, ok := m.ClassMap[dev.ID]; ok {
			class = m.ClassNames[c]
		}
		if class != dev.Class {
			bad("device %d class %q, want %q", dev.ID, class, dev.Class)
		}
	}
	for _, ty := range d.Types {
		if ty.ID == 0 && ty.Name == "device" {
			continue // crushtool's placeholder for a map without type 0
		}
		if m.Types[ty.ID] != ty.Name {
			bad("type %d %q, want %q", ty.ID, m.Types[ty.ID], ty.Name)
		}
	}
	nb := 0
	for _, b := range m.Buckets {
		if b != nil {
			nb++
		}
	}
	if nb != len(d.Buckets) {
		bad("%d buckets, want %d", nb, len(d.Buckets))
	}
	for _, db := range d.Buckets {
		b := m.Bucket(db.ID)
		if b == nil {
			bad("bucket %d missing", db.ID)
			continue
		}
		if m.Names[db.ID] != db.Name || b.Type != db.TypeID || b.Weight != db.Weight ||
			AlgName(b.Alg) != db.Alg || db.Hash != "rjenkins1" && b.Hash == HashRjenkins1 {
			bad("bucket %d: name %q type %d weight %d alg %s hash %d, want %q %d %d %s %s",
				db.ID, m.Names[db.ID], b.Type, b.Weight, AlgName(b.Alg), b.Hash,
				db.Name, db.TypeID, db.Weight, db.Alg, db.Hash)
		}
		if len(b.Items) != len(db.Items) {
			bad("bucket %d: %d items, want %d", db.ID, len(b.Items), len(db.Items))
			continue
		}
		for _, it := range db.Items {
			if b.Items[it.Pos] != it.ID || b.ItemWeightAt(it.Pos) != it.Weight {
				bad("bucket %d pos %d: item %d weight %d, want %d %d", db.ID, it.Pos,
					b.Items[it.Pos], b.ItemWeightAt(it.Pos), it.ID, it.Weight)
			}
		}
	}
	nr := 0
	for _, r := range m.Rules {
		if r != nil {
			nr++
		}
	}
	if nr != len(d.Rules) {
		bad("%d rules, want %d", nr, len(d.Rules))
	}
	for _, dr := range d.Rules {
		r := m.Rule(dr.ID)
		if r == nil {
			bad("rule %d missing", dr.ID)
			continue
		}
		if m.RuleNames[int32(dr.ID)] != dr.Name || int(r.Ruleset) != dr.Ruleset || int(r.Type) != dr.Type ||
			int(r.MinSize) != dr.MinSize || int(r.MaxSize) != dr.MaxSize || len(r.Steps) != len(dr.Steps) {
			bad("rule %d: %q ruleset %d type %d size %d..%d steps %d, want %q %d %d %d..%d %d",
				dr.ID, m.RuleNames[int32(dr.ID)], r.Ruleset, r.Type, r.MinSize, r.MaxSize, len(r.Steps),
				dr.Name, dr.Ruleset, dr.Type, dr.MinSize, dr.MaxSize, len(dr.Steps))
			continue
		}
		for j, ds := range dr.Steps {
			s := r.Steps[j]
			if name, ok := stepOpNames[s.Op]; ok && name != ds.Op {
				bad("rule %d step %d op %d (%s), want %s", dr.ID, j, s.Op, name, ds.Op)
			}
			if ds.Item != nil && *ds.Item != s.Arg1 {
				bad("rule %d step %d item %d, want %d", dr.ID, j, s.Arg1, *ds.Item)
			}
			if ds.Num != nil && *ds.Num != s.Arg1 {
				bad("rule %d step %d num %d, want %d", dr.ID, j, s.Arg1, *ds.Num)
			}
			if ds.Type != "" && m.Types[s.Arg2] != ds.Type {
				bad("rule %d step %d type %q, want %q", dr.ID, j, m.Types[s.Arg2], ds.Type)
			}
		}
	}
	tun := m.Tunables
	for k, want := range map[string]uint32{
		"choose_local_tries":          tun.ChooseLocalTries,
		"choose_local_fallback_tries": tun.ChooseLocalFallbackTries,
		"choose_total_tries":          tun.ChooseTotalTries,
		"chooseleaf_descend_once":     tun.ChooseLeafDescendOnce,
		"chooseleaf_vary_r":           uint32(tun.ChooseLeafVaryR),
		"chooseleaf_stable":           uint32(tun.ChooseLeafStable),
		"straw_calc_version":          uint32(tun.StrawCalcVersion),
		"allowed_bucket_algs":         tun.AllowedBucketAlgs,
	} {
		got, ok := d.Tunables[k].(float64)
		if !ok || uint32(got) != want {
			bad("tunable %s = %d, crushtool says %v", k, want, d.Tunables[k])
		}
	}
	if len(d.ChooseArgs) != len(m.ChooseArgs) {
		bad("%d choose_args maps, want %d", len(m.ChooseArgs), len(d.ChooseArgs))
	}
	for key, dargs := range d.ChooseArgs {
		idx, _ := strconv.ParseInt(key, 10, 64)
		args, ok := m.ChooseArgs[idx]
		if !ok {
			bad("choose_args %s missing", key)
			continue
		}
		n := 0
		for _, a := range args {
			if len(a.WeightSets) > 0 || len(a.IDs) > 0 {
				n++
			}
		}
		if n != len(dargs) {
			bad("choose_args %s: %d buckets, want %d", key, n, len(dargs))
		}
		for _, da := range dargs {
			a := args[int(-1-da.BucketID)]
			if len(a.WeightSets) != len(da.WeightSet) || len(a.IDs) != len(da.IDs) {
				bad("choose_args %s bucket %d: shape differs", key, da.BucketID)
				continue
			}
			for p, ws := range da.WeightSet {
				for k, w := range ws {
					if k >= len(a.WeightSets[p]) ||
						math.Abs(float64(a.WeightSets[p][k])/0x10000-w) > 1e-5*math.Max(1, w) {
						bad("choose_args %s bucket %d position %d weight %d differs", key, da.BucketID, p, k)
					}
				}
			}
			for k, id := range da.IDs {
				if a.IDs[k] != id {
					bad("choose_args %s bucket %d id %d = %d, want %d", key, da.BucketID, k, a.IDs[k], id)
				}
			}
		}
	}
	return diffs
}

func TestDecodeCorpusAgainstCrushtool(t *testing.T) {
	for _, path := range corpus.Files(t, "CrushWrapper") {
		name := filepath.Base(filepath.Dir(filepath.Dir(path))) + "/" + filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(raw)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			for _, diff := range compareWithDump(m, crushtoolDump(t, path)) {
				t.Error(diff)
			}
		})
	}
}

func TestDecodeMSRTunables(t *testing.T) {
	// Squid and later append msr_descents and msr_collision_tries; older
	// encodings leave Ceph's defaults.
	for _, path := range corpus.Files(t, "CrushWrapper") {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if m.Tunables.MSRDescents == 0 || m.Tunables.MSRCollisionTries == 0 {
			t.Errorf("%s: msr tunables %d/%d, want non-zero", path, m.Tunables.MSRDescents, m.Tunables.MSRCollisionTries)
		}
	}
}

func TestDecodeRejectsTruncated(t *testing.T) {
	for _, path := range corpus.Files(t, "CrushWrapper") {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Every cut inside the fixed part (buckets, rules, name maps) must
		// fail cleanly; cuts in the optional tail may legitimately decode.
		for n := 0; n < len(raw); n++ {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s cut at %d: panic %v", path, n, r)
					}
				}()
				_, _ = Decode(raw[:n])
			}()
		}
		if _, err := Decode(raw[:11]); err == nil {
			t.Errorf("%s: 11-byte prefix decoded", path)
		}
	}
	if _, err := Decode([]byte{1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}); err == nil {
		t.Error("bad magic accepted")
	}
}

// TestDecodeLiveCrushMap checks the CRUSH map captured from a live 16.2.15
// cluster against `ceph osd crush dump` of the same cluster.
func TestDecodeLiveCrushMap(t *testing.T) {
	dir := filepath.Join(corpus.ModuleRoot(t), "testdata", "cluster-16.2.15")
	raw, err := os.ReadFile(filepath.Join(dir, "crushmap.bin"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(dir, "crushmap.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d crushDump
	if err := json.Unmarshal(js, &d); err != nil {
		t.Fatal(err)
	}
	for _, diff := range compareWithDump(m, &d) {
		t.Error(diff)
	}
}
