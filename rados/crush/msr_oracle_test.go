package crush

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/internal/shorttier"
	"github.com/purerbd/purerbd/rados/radostest/cephcluster"
)

var updateMSR = flag.Bool("update-msr", false, "rewrite testdata/msr from Tentacle's crushtool")

const msrTestdata = "testdata/msr"

// rootCrushtool runs Tentacle's crushtool inside the sid root (Pacific's,
// on the host, knows no MSR rules). Files it reads and writes live in dir,
// a directory under the root's /tmp.
type rootCrushtool struct {
	root string
	dir  string
}

// newRootCrushtool finds the sid root, building it if it is missing
// (EnsureRoot waits for a build already under way).
func newRootCrushtool(t *testing.T) *rootCrushtool {
	t.Helper()
	shorttier.Skip(t, "Ceph 20.2's crushtool (the sid root)")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	root, err := cephcluster.EnsureRoot(ctx, cephcluster.ReleaseTentacle)
	if err != nil {
		t.Fatalf("the Tentacle root is required for this test: %v", err)
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "purerbd-crush-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &rootCrushtool{root: root, dir: dir}
}

// inside returns the path a file of dir has inside the root.
func (c *rootCrushtool) inside(name string) string {
	rel, _ := filepath.Rel(c.root, filepath.Join(c.dir, name))
	return "/" + rel
}

func (c *rootCrushtool) run(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("chroot", append([]string{c.root, "crushtool"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crushtool %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// msrSection is one crushtool --test run of a case.
type msrSection struct {
	rule, numRep int
	weights      []string
}

func (s msrSection) header() string {
	return strings.TrimSpace(fmt.Sprintf("# rule %d num-rep %d %s", s.rule, s.numRep, strings.Join(s.weights, " ")))
}

func (s msrSection) testArgs(path string) []string {
	args := []string{"-i", path, "--test", "--show-mappings", "--rule", strconv.Itoa(s.rule),
		"--num-rep", strconv.Itoa(s.numRep), "--min-x", "0", "--max-x", strconv.Itoa(msrMaxX)}
	return append(args, s.weights...)
}

// parseMSRHeader reads a section header back.
func parseMSRHeader(line string) (msrSection, error) {
	f := strings.Fields(strings.TrimPrefix(line, "# "))
	if len(f) < 4 || f[0] != "rule" || f[2] != "num-rep" {
		return msrSection{}, fmt.Errorf("bad section header %q", line)
	}
	r, err1 := strconv.Atoi(f[1])
	n, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil {
		return msrSection{}, fmt.Errorf("bad section header %q", line)
	}
	return msrSection{rule: r, numRep: n, weights: f[4:]}, nil
}

// compareMappings fails the test at the first line where ours differs.
func compareMappings(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range min(len(wl), len(gl)) {
		if wl[i] != gl[i] {
			t.Fatalf("%s line %d:\n got  %s\n want %s", what, i+1, gl[i], wl[i])
		}
	}
	t.Fatalf("%s: %d lines, want %d", what, len(gl), len(wl))
}

func decodeFile(t *testing.T, path string) *Map {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(raw)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return m
}

// TestMSRMatchesTentacleCrushtool compiles the MSR cases with Tentacle's
// crushtool and compares every mapping with its --test --show-mappings;
// the compiled maps and crushtool's mappings must also equal those kept
// in testdata/msr (rewritten instead with -update-msr).
func TestMSRMatchesTentacleCrushtool(t *testing.T) {
	ct := newRootCrushtool(t)
	for _, tc := range msrCases() {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(ct.dir, tc.name+".txt")
			if err := os.WriteFile(src, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(ct.dir, tc.name+".bin")
			ct.run(t, "-c", ct.inside(tc.name+".txt"), "-o", ct.inside(tc.name+".bin"))
			m := decodeFile(t, bin)
			var all bytes.Buffer
			for r, rule := range m.Rules {
				if rule == nil {
					continue
				}
				if !isMSR(rule.Type) {
					t.Fatalf("rule %d has type %d, not an MSR type", r, rule.Type)
				}
				for _, n := range tc.reps {
					for _, w := range tc.weights {
						s := msrSection{rule: r, numRep: n, weights: w}
						want := ct.run(t, s.testArgs(ct.inside(tc.name+".bin"))...)
						weights, _ := testWeights(t, m, w)
						compareMappings(t, s.header(), ourMappings(m, r, n, 0, msrMaxX, weights, -1), want)
						fmt.Fprintln(&all, s.header())
						all.Write(stripMappings(t, r, want))
					}
				}
			}
			raw, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			if *updateMSR {
				writeMSRTestdata(t, tc.name, raw, all.Bytes())
				return
			}
			// The kept map must be this case's map. Its bytes may differ:
			// crushtool leaves node 0 of the shadow copies of tree buckets
			// uninitialized, so compare what crushtool decompiles.
			keptBin, keptMappings := readMSRTestdata(t, tc.name)
			if err := os.WriteFile(filepath.Join(ct.dir, "kept.bin"), keptBin, 0o644); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ct.run(t, "-d", ct.inside("kept.bin")), ct.run(t, "-d", ct.inside(tc.name+".bin"))) {
				t.Errorf("%s/%s.bin is not the map crushtool compiles %s to (rerun with -update-msr)", msrTestdata, tc.name, tc.name)
			}
			if !bytes.Equal(all.Bytes(), keptMappings) {
				t.Errorf("crushtool maps %s otherwise than %s/%s.mappings.gz (rerun with -update-msr)", tc.name, msrTestdata, tc.name)
			}
		})
	}
}

// stripMappings drops the "CRUSH rule R x X " prefix of each line of
// crushtool --show-mappings output (x running from 0), which the kept
// mappings leave out to stay small.
func stripMappings(t *testing.T, rule int, out []byte) []byte {
	t.Helper()
	var b []byte
	for x, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		prefix := fmt.Sprintf("CRUSH rule %d x %d ", rule, x)
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			t.Fatalf("mapping line %q does not start with %q", line, prefix)
		}
		b = append(append(b, rest...), '\n')
	}
	return b
}

func writeMSRTestdata(t *testing.T, name string, bin, mappings []byte) {
	t.Helper()
	if err := os.MkdirAll(msrTestdata, 0o755); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(mappings)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{name + ".bin": bin, name + ".mappings.gz": gz.Bytes()} {
		if err := os.WriteFile(filepath.Join(msrTestdata, file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readMSRTestdata(t *testing.T, name string) (bin, mappings []byte) {
	t.Helper()
	bin, err := os.ReadFile(filepath.Join(msrTestdata, name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(msrTestdata, name+".mappings.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	mappings, err = io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return bin, mappings
}

// TestMSRGolden checks the mapper against the maps Tentacle's crushtool
// compiled and the mappings it computed (testdata/msr), without Ceph:
// every section of every case must be there and match. A section is a
// "# rule R num-rep N [weights]" header, then the mapping of each x from
// 0 to msrMaxX on a line of its own.
func TestMSRGolden(t *testing.T) {
	for _, tc := range msrCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin, mappings := readMSRTestdata(t, tc.name)
			m, err := Decode(bin)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			sections := 0
			sc := bufio.NewScanner(bytes.NewReader(mappings))
			var s msrSection
			var want []byte
			check := func() {
				if want == nil {
					return
				}
				weights, _ := testWeights(t, m, s.weights)
				got := stripMappings(t, s.rule, ourMappings(m, s.rule, s.numRep, 0, msrMaxX, weights, -1))
				compareMappings(t, s.header(), got, want)
				sections++
			}
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "# ") {
					check()
					if s, err = parseMSRHeader(line); err != nil {
						t.Fatal(err)
					}
					want = []byte{}
					continue
				}
				want = append(append(want, line...), '\n')
			}
			check()
			rules := 0
			for _, r := range m.Rules {
				if r != nil {
					rules++
				}
			}
			if wantSections := rules * len(tc.reps) * len(tc.weights); sections != wantSections || rules == 0 {
				t.Fatalf("%d sections checked, the case has %d", sections, wantSections)
			}
		})
	}
}
