package crush

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The oracle tests build CRUSH maps of many shapes with crushtool and
// compare every mapping of x in [0, 9999] with `crushtool --test
// --show-mappings`, line by line.

func crushtool(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(needTool(t, "crushtool"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crushtool %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// mapBuilder makes a map file in dir and returns its path.
type mapBuilder func(t *testing.T, dir string) string

// built runs `crushtool --build`, then each modification as its own
// crushtool pass (crushtool applies only one --reweight-item per run).
func built(numOSDs int, layers string, mods ...string) mapBuilder {
	return func(t *testing.T, dir string) string {
		p := filepath.Join(dir, "map")
		args := append([]string{"--build", "--num_osds", strconv.Itoa(numOSDs)}, strings.Fields(layers)...)
		crushtool(t, append(args, "-o", p)...)
		for _, m := range mods {
			crushtool(t, append(append([]string{"-i", p}, strings.Fields(m)...), "-o", p)...)
		}
		return p
	}
}

// compiled compiles a text map.
func compiled(text string) mapBuilder {
	return func(t *testing.T, dir string) string {
		src := filepath.Join(dir, "map.txt")
		if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "map")
		crushtool(t, "-c", src, "-o", p)
		return p
	}
}

const (
	argonaut = "--set-choose-local-tries 2 --set-choose-local-fallback-tries 5 --set-choose-total-tries 19 " +
		"--set-chooseleaf-descend-once 0 --set-chooseleaf-vary-r 0 --set-chooseleaf-stable 0"
	bobtail = "--set-choose-local-tries 0 --set-choose-local-fallback-tries 0 --set-choose-total-tries 50 " +
		"--set-chooseleaf-descend-once 1 --set-chooseleaf-vary-r 0 --set-chooseleaf-stable 0"
	firefly = "--set-chooseleaf-vary-r 1 --set-chooseleaf-stable 0"
	indep   = "--create-simple-rule ec root host indep"
)

const textHeader = `tunable choose_local_tries 0
tunable choose_local_fallback_tries 0
tunable choose_total_tries 50
tunable chooseleaf_descend_once 1
tunable chooseleaf_vary_r 1
tunable chooseleaf_stable 1
tunable straw_calc_version 1
tunable allowed_bucket_algs 54
`

// classesAndWeightSets has device classes (shadow trees), a weight set
// with per-position weights and replacement ids, and an erasure rule.
const classesAndWeightSets = textHeader + `
device 0 osd.0 class ssd
device 1 osd.1 class hdd
device 2 osd.2 class ssd
device 3 osd.3 class hdd
device 4 osd.4 class ssd
device 5 osd.5 class hdd
device 6 osd.6 class hdd
type 0 osd
type 1 host
type 2 root
host h0 { id -1 alg straw2 hash 0 item osd.0 weight 1.000 item osd.1 weight 2.000 }
host h1 { id -2 alg straw2 hash 0 item osd.2 weight 1.000 item osd.3 weight 1.000 item osd.6 weight 0.25 }
host h2 { id -3 alg straw2 hash 0 item osd.4 weight 1.000 item osd.5 weight 0.500 }
root default { id -4 alg straw2 hash 0 item h0 weight 3.000 item h1 weight 2.250 item h2 weight 1.500 }
rule rep { id 0 type replicated min_size 1 max_size 10 step take default step chooseleaf firstn 0 type host step emit }
rule ssd { id 1 type replicated min_size 1 max_size 10 step take default class ssd step chooseleaf firstn 0 type host step emit }
rule ec { id 2 type erasure min_size 3 max_size 6 step set_chooseleaf_tries 5 step set_choose_tries 100 step take default step chooseleaf indep 0 type host step emit }
rule hddosd { id 3 type replicated min_size 1 max_size 10 step take default class hdd step choose firstn 0 type osd step emit }
choose_args 0 {
  { bucket_id -4 weight_set [ [ 1.000 2.000 3.000 ] [ 3.000 1.000 1.000 ] ] ids [ -10 -11 -12 ] }
  { bucket_id -1 weight_set [ [ 0.500 1.000 ] ] }
  { bucket_id -2 ids [ 7 8 9 ] }
}
`

// racks has two-step rules: racks then hosts, firstn and indep, and
// plain choose of devices.
const racks = textHeader + `
device 0 osd.0
device 1 osd.1
device 2 osd.2
device 3 osd.3
device 4 osd.4
device 5 osd.5
device 6 osd.6
device 7 osd.7
device 8 osd.8
device 9 osd.9
device 10 osd.10
device 11 osd.11
type 0 osd
type 1 host
type 2 rack
type 3 root
host a0 { id -1 alg straw2 hash 0 item osd.0 weight 1.0 item osd.1 weight 1.0 }
host a1 { id -2 alg straw2 hash 0 item osd.2 weight 1.0 item osd.3 weight 0.7 }
host b0 { id -3 alg straw hash 0 item osd.4 weight 1.0 item osd.5 weight 2.0 }
host b1 { id -4 alg list hash 0 item osd.6 weight 1.0 item osd.7 weight 1.0 }
host c0 { id -5 alg tree hash 0 item osd.8 weight 1.0 item osd.9 weight 3.0 }
host c1 { id -6 alg uniform hash 0 item osd.10 weight 1.0 item osd.11 weight 1.0 }
rack ra { id -7 alg straw2 hash 0 item a0 weight 2.0 item a1 weight 1.7 }
rack rb { id -8 alg straw2 hash 0 item b0 weight 3.0 item b1 weight 2.0 }
rack rc { id -9 alg straw2 hash 0 item c0 weight 4.0 item c1 weight 2.0 }
root default { id -10 alg straw2 hash 0 item ra weight 3.7 item rb weight 5.0 item rc weight 6.0 }
rule two { id 0 type replicated min_size 1 max_size 10 step take default step choose firstn 2 type rack step chooseleaf firstn 2 type host step emit }
rule twoec { id 1 type erasure min_size 1 max_size 10 step set_chooseleaf_tries 5 step set_choose_tries 100 step take default step choose indep 3 type rack step chooseleaf indep 2 type host step emit }
rule osds { id 2 type replicated min_size 1 max_size 10 step take default step choose firstn 0 type osd step emit }
rule osdsec { id 3 type erasure min_size 1 max_size 10 step take default step choose indep 0 type osd step emit }
rule steps { id 4 type replicated min_size 1 max_size 10 step set_choose_local_tries 1 step set_choose_local_fallback_tries 3 step set_chooseleaf_vary_r 0 step set_chooseleaf_stable 0 step set_choose_tries 30 step take default step chooseleaf firstn 0 type host step emit }
rule twotakes { id 5 type replicated min_size 1 max_size 10 step take ra step chooseleaf firstn 1 type host step emit step take rc step chooseleaf firstn -1 type host step emit }
`

// legacyStraw uses straw buckets built with straw_calc_version 0 and
// uneven weights, under argonaut tunables.
const legacyStraw = `tunable choose_local_tries 2
tunable choose_local_fallback_tries 5
tunable choose_total_tries 19
tunable chooseleaf_descend_once 0
tunable straw_calc_version 0
device 0 osd.0
device 1 osd.1
device 2 osd.2
device 3 osd.3
device 4 osd.4
device 5 osd.5
device 6 osd.6
device 7 osd.7
type 0 osd
type 1 host
type 2 root
host h0 { id -1 alg straw hash 0 item osd.0 weight 1.0 item osd.1 weight 1.0 item osd.2 weight 2.0 }
host h1 { id -2 alg straw hash 0 item osd.3 weight 0.3 item osd.4 weight 1.0 }
host h2 { id -3 alg straw hash 0 item osd.5 weight 1.0 item osd.6 weight 1.0 item osd.7 weight 1.0 }
root default { id -4 alg straw hash 0 item h0 weight 4.0 item h1 weight 1.3 item h2 weight 3.0 }
rule rep { id 0 type replicated min_size 1 max_size 10 step take default step chooseleaf firstn 0 type host step emit }
rule ec { id 1 type erasure min_size 1 max_size 10 step take default step chooseleaf indep 0 type host step emit }
`

type oracleCase struct {
	name  string
	build mapBuilder
	reps  []int
	extra []string // more crushtool --test arguments
}

func oracleCases() []oracleCase {
	const three = "host straw2 3 rack straw2 2 root straw2 0"
	return []oracleCase{
		{"straw2-3level", built(12, three, indep), []int{3, 4}, nil},
		{"straw-2level", built(9, "host straw 3 root straw 0", indep), []int{3}, nil},
		{"list-2level", built(10, "host list 5 root list 0", indep), []int{2, 3}, nil},
		{"tree-2level", built(10, "host tree 4 root tree 0", indep), []int{3}, nil},
		{"uniform-2level", built(12, "host uniform 4 root uniform 0", indep), []int{3}, nil},
		{"mixed-4level", built(16, "host uniform 2 rack tree 2 row list 2 root straw 0",
			"--create-simple-rule ec root rack indep"), []int{3}, nil},
		{"mixed-3level", built(18, "host straw2 3 rack uniform 3 root tree 0", indep), []int{3}, nil},
		{"flat", built(7, "root straw2 0", "--create-simple-rule byosd root osd firstn"), []int{3}, nil},
		{"deep", built(16, "host straw2 2 rack straw2 2 row straw2 2 root straw2 0", indep), []int{3, 5}, nil},
		{"reweighted", built(12, three, "--reweight-item osd.3 0.5", "--reweight-item osd.7 3.0",
			"--reweight-item osd.1 0", indep), []int{3}, nil},
		{"argonaut-straw2", built(12, three, argonaut, indep), []int{3}, nil},
		{"argonaut-uniform", built(12, "host uniform 3 root uniform 0", argonaut, indep), []int{3, 4}, nil},
		{"argonaut-list-tree", built(12, "host list 3 root tree 0", argonaut, indep), []int{3}, nil},
		{"bobtail", built(12, three, bobtail, indep), []int{3}, nil},
		{"firefly-deep", built(16, "host straw2 2 rack straw2 2 row straw2 2 root straw2 0", firefly, indep), []int{3}, nil},
		{"vary-r-2", built(12, three, "--set-chooseleaf-vary-r 2", indep), []int{3}, nil},
		{"device-weights", built(12, three, indep), []int{3},
			[]string{"--weight", "0", "0.5", "--weight", "3", "0", "--weight", "5", "0.2", "--weight", "11", "0.9"}},
		{"classes-weight-sets", compiled(classesAndWeightSets), []int{3, 4}, nil},
		{"racks-two-step", compiled(racks), []int{3, 4, 6}, nil},
		{"legacy-straw", compiled(legacyStraw), []int{3}, []string{"--weight", "2", "0.6"}},
		{"holes", built(12, three, "--remove-item osd.4", "--remove-item osd.9", indep), []int{3}, nil},
		{"too-many-reps", built(9, "host straw2 3 root straw2 0", indep), []int{5, 8}, nil},
		{"pool-id", built(12, three, indep), []int{3}, []string{"--pool-id", "7"}},
		{"tree-uneven", built(10, "host tree 5 root tree 0", "--reweight-item osd.2 2.5",
			"--reweight-item osd.6 0.1", indep), []int{3}, nil},
		{"list-uneven", built(10, "host list 5 root list 0", "--reweight-item osd.0 4", "--reweight-item osd.8 0.25",
			argonaut, indep), []int{3}, nil},
		{"uniform-local-fallback", built(20, "host uniform 5 root straw2 0", argonaut, indep), []int{3, 4},
			[]string{"--weight", "1", "0.3", "--weight", "2", "0", "--weight", "7", "0.1"}},
	}
}

// ourMappings formats DoRule results the way crushtool --test does.
func ourMappings(m *Map, rule, numRep, minX, maxX int, weights []uint32, poolID int64) []byte {
	var b []byte
	args := m.ChooseArgsFor(0)
	for x := minX; x <= maxX; x++ {
		realX := uint32(x)
		if poolID >= 0 {
			realX = Hash32_2(HashRjenkins1, uint32(x), uint32(poolID))
		}
		out := m.DoRule(rule, realX, numRep, weights, args)
		b = append(b, "CRUSH rule "...)
		b = strconv.AppendInt(b, int64(rule), 10)
		b = append(b, " x "...)
		b = strconv.AppendInt(b, int64(x), 10)
		b = append(b, " ["...)
		for i, v := range out {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(v), 10)
		}
		b = append(b, "]\n"...)
	}
	return b
}

// testWeights applies crushtool-style --weight and --pool-id arguments.
func testWeights(t *testing.T, m *Map, extra []string) ([]uint32, int64) {
	w := m.PresentWeights()
	poolID := int64(-1)
	for i := 0; i < len(extra); i++ {
		switch extra[i] {
		case "--weight":
			dev, _ := strconv.Atoi(extra[i+1])
			f, _ := strconv.ParseFloat(extra[i+2], 64)
			v := int64(float32(f) * 0x10000)
			v = max(0, min(v, 0x10000))
			w[dev] = uint32(v)
			i += 2
		case "--pool-id":
			poolID, _ = strconv.ParseInt(extra[i+1], 10, 64)
			i++
		default:
			t.Fatalf("unhandled extra argument %q", extra[i])
		}
	}
	return w, poolID
}

func TestMapperMatchesCrushtool(t *testing.T) {
	const minX, maxX = 0, 9999
	cases := oracleCases()
	if len(cases) < 20 {
		t.Fatalf("only %d map shapes", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := tc.build(t, t.TempDir())
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(raw)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			weights, poolID := testWeights(t, m, tc.extra)
			for r, rule := range m.Rules {
				if rule == nil {
					continue
				}
				for _, n := range tc.reps {
					args := []string{"-i", path, "--test", "--show-mappings", "--rule", strconv.Itoa(r),
						"--num-rep", strconv.Itoa(n), "--min-x", strconv.Itoa(minX), "--max-x", strconv.Itoa(maxX)}
					want := crushtool(t, append(args, tc.extra...)...)
					got := ourMappings(m, r, n, minX, maxX, weights, poolID)
					if !bytes.Equal(got, want) {
						wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
						for i := range min(len(wl), len(gl)) {
							if wl[i] != gl[i] {
								t.Fatalf("rule %d num-rep %d line %d:\n got  %s\n want %s", r, n, i+1, gl[i], wl[i])
							}
						}
						t.Fatalf("rule %d num-rep %d: %d lines, want %d", r, n, len(gl), len(wl))
					}
				}
			}
		})
	}
}
