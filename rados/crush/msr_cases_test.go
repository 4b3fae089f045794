package crush

// The MSR cases: text maps with msr_firstn and msr_indep rules, each run
// for every rule, replica count and device weighting listed, over x in
// [0, msrMaxX]. Tentacle's crushtool compiled them into
// testdata/msr/NAME.bin and mapped them into testdata/msr/NAME.mappings
// (TestMSRMatchesTentacleCrushtool writes both with -update-msr and
// otherwise checks them against it); TestMSRGolden checks the mapper
// against those files without Ceph.

import (
	"fmt"
	"strings"
)

const msrMaxX = 1023

// osdDevices returns the device lines of a text map for osd.0 to
// osd.(n-1).
func osdDevices(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "device %d osd.%d\n", i, i)
	}
	return b.String()
}

type msrCase struct {
	name    string
	text    string
	reps    []int
	weights [][]string // crushtool --test arguments; each set runs on its own
}

// msrHosts: five straw2 hosts of uneven weight; EC-style and replicated
// MSR rules, a rule choosing devices straight from the root, more hosts
// asked for than there are (which costs Ceph msr_descents times
// msr_collision_tries descents per missing one: the rule lowers both to
// keep the test quick), tight retry limits in the rule, and two emit
// blocks.
var msrHosts = textHeader + `tunable msr_descents 100
tunable msr_collision_tries 100
` + osdDevices(15) + `type 0 osd
type 1 host
type 2 root
host h0 { id -1 alg straw2 hash 0 item osd.0 weight 1.0 item osd.1 weight 1.0 item osd.2 weight 1.0 }
host h1 { id -2 alg straw2 hash 0 item osd.3 weight 2.0 item osd.4 weight 1.0 item osd.5 weight 0.5 }
host h2 { id -3 alg straw2 hash 0 item osd.6 weight 1.0 item osd.7 weight 1.0 item osd.8 weight 1.0 }
host h3 { id -4 alg straw2 hash 0 item osd.9 weight 1.0 item osd.10 weight 3.0 item osd.11 weight 1.0 }
host h4 { id -5 alg straw2 hash 0 item osd.12 weight 0.5 item osd.13 weight 0.5 item osd.14 weight 1.0 }
root default { id -6 alg straw2 hash 0 item h0 weight 3.0 item h1 weight 3.5 item h2 weight 3.0 item h3 weight 5.0 item h4 weight 2.0 }
rule ec22 { id 0 type msr_indep step take default step choosemsr 2 type host step choosemsr 2 type osd step emit }
rule ecperhost { id 1 type msr_indep step set_msr_descents 20 step set_msr_collision_tries 20 step take default step choosemsr 0 type host step choosemsr 1 type osd step emit }
rule rep3 { id 2 type msr_firstn step take default step choosemsr 3 type host step choosemsr 1 type osd step emit }
rule osds { id 3 type msr_firstn step take default step choosemsr 0 type osd step emit }
rule tight { id 4 type msr_indep step set_msr_descents 2 step set_msr_collision_tries 1 step take default step choosemsr 4 type host step choosemsr 2 type osd step emit }
rule twoblocks { id 5 type msr_firstn step take h0 step choosemsr 1 type osd step emit step take default step choosemsr 2 type host step choosemsr 1 type osd step emit }
rule indepblocks { id 6 type msr_indep step take h3 step choosemsr 2 type osd step emit step take default step choosemsr 0 type host step choosemsr 1 type osd step emit }
`

// msrRacks: racks of hosts of the list, tree, straw and straw2
// algorithms, device classes (shadow trees: Tentacle makes none through
// uniform buckets), a weight set (choose_args), three choose levels, a
// level skipped, and a rule with no descents at all.
const msrRacks = textHeader + `device 0 osd.0 class ssd
device 1 osd.1 class hdd
device 2 osd.2 class ssd
device 3 osd.3 class hdd
device 4 osd.4 class ssd
device 5 osd.5 class hdd
device 6 osd.6 class ssd
device 7 osd.7 class hdd
device 8 osd.8 class ssd
device 9 osd.9 class hdd
device 10 osd.10 class ssd
device 11 osd.11 class hdd
device 12 osd.12 class ssd
device 13 osd.13 class hdd
type 0 osd
type 1 host
type 2 rack
type 3 root
host a0 { id -1 alg straw2 hash 0 item osd.0 weight 1.0 item osd.1 weight 1.0 }
host a1 { id -2 alg list hash 0 item osd.2 weight 1.0 item osd.3 weight 2.0 }
host b0 { id -3 alg tree hash 0 item osd.4 weight 1.0 item osd.5 weight 1.0 item osd.6 weight 0.5 }
host b1 { id -4 alg straw hash 0 item osd.7 weight 1.0 item osd.8 weight 1.5 }
host c0 { id -5 alg straw2 hash 0 item osd.9 weight 1.0 item osd.10 weight 1.0 }
host c1 { id -6 alg straw2 hash 0 item osd.11 weight 2.0 item osd.12 weight 1.0 item osd.13 weight 1.0 }
rack ra { id -7 alg straw2 hash 0 item a0 weight 2.0 item a1 weight 3.0 }
rack rb { id -8 alg straw2 hash 0 item b0 weight 2.5 item b1 weight 2.5 }
rack rc { id -9 alg straw2 hash 0 item c0 weight 2.0 item c1 weight 4.0 }
root default { id -10 alg straw2 hash 0 item ra weight 5.0 item rb weight 5.0 item rc weight 6.0 }
rule rackhostosd { id 0 type msr_indep step take default step choosemsr 2 type rack step choosemsr 2 type host step choosemsr 2 type osd step emit }
rule ssdhosts { id 1 type msr_firstn step take default class ssd step choosemsr 4 type host step choosemsr 1 type osd step emit }
rule rackosd { id 2 type msr_indep step take default step choosemsr 3 type rack step choosemsr 2 type osd step emit }
rule nodescents { id 3 type msr_indep step set_msr_descents 0 step take default step choosemsr 0 type host step choosemsr 1 type osd step emit }
rule hddrack { id 4 type msr_firstn step set_msr_descents 7 step take default class hdd step choosemsr 2 type rack step choosemsr 2 type osd step emit }
choose_args 0 {
  { bucket_id -10 weight_set [ [ 1.000 2.000 3.000 ] [ 3.000 1.000 1.000 ] ] ids [ -20 -21 -22 ] }
  { bucket_id -9 weight_set [ [ 0.500 3.000 ] ] }
}
`

// msrSkewed: one host holds most of the weight, and the map's retry
// limits are small, so that collisions exhaust msr_collision_tries and
// descents run out: holes for msr_indep, short lists for msr_firstn.
var msrSkewed = textHeader + `tunable msr_descents 3
tunable msr_collision_tries 2
` + osdDevices(8) + `type 0 osd
type 1 host
type 2 root
host s0 { id -1 alg straw2 hash 0 item osd.0 weight 8.0 item osd.1 weight 8.0 }
host s1 { id -2 alg straw2 hash 0 item osd.2 weight 0.5 item osd.3 weight 0.1 }
host s2 { id -3 alg straw2 hash 0 item osd.4 weight 0.2 item osd.5 weight 0.3 }
host s3 { id -4 alg straw2 hash 0 item osd.6 weight 0.4 item osd.7 weight 0.2 }
root default { id -5 alg straw2 hash 0 item s0 weight 16.0 item s1 weight 0.6 item s2 weight 0.5 item s3 weight 0.6 }
rule indep3 { id 0 type msr_indep step take default step choosemsr 3 type host step choosemsr 1 type osd step emit }
rule firstn3 { id 1 type msr_firstn step take default step choosemsr 3 type host step choosemsr 1 type osd step emit }
rule roomy { id 2 type msr_indep step set_msr_descents 50 step set_msr_collision_tries 50 step take default step choosemsr 2 type host step choosemsr 2 type osd step emit }
`

// msrUniform: uniform buckets only, whose permutation choice sees the
// large draws MSR descents make.
var msrUniform = textHeader + osdDevices(12) + `type 0 osd
type 1 host
type 2 root
host u0 { id -1 alg uniform hash 0 item osd.0 weight 1.0 item osd.1 weight 1.0 item osd.2 weight 1.0 }
host u1 { id -2 alg uniform hash 0 item osd.3 weight 1.0 item osd.4 weight 1.0 item osd.5 weight 1.0 }
host u2 { id -3 alg uniform hash 0 item osd.6 weight 1.0 item osd.7 weight 1.0 item osd.8 weight 1.0 }
host u3 { id -4 alg uniform hash 0 item osd.9 weight 1.0 item osd.10 weight 1.0 item osd.11 weight 1.0 }
root default { id -5 alg uniform hash 0 item u0 weight 3.0 item u1 weight 3.0 item u2 weight 3.0 item u3 weight 3.0 }
rule ec22 { id 0 type msr_indep step take default step choosemsr 2 type host step choosemsr 2 type osd step emit }
rule rep { id 1 type msr_firstn step take default step choosemsr 0 type host step choosemsr 1 type osd step emit }
`

func msrCases() []msrCase {
	return []msrCase{
		{"hosts", msrHosts, []int{3, 4, 6}, [][]string{
			nil,
			{"--weight", "1", "0", "--weight", "4", "0.5", "--weight", "7", "0", "--weight", "10", "0.8"},
			// a whole host out, and most of another
			{"--weight", "6", "0", "--weight", "7", "0", "--weight", "8", "0", "--weight", "0", "0", "--weight", "2", "0.1"},
		}},
		{"racks", msrRacks, []int{4, 8, 10}, [][]string{
			nil,
			{"--weight", "0", "0", "--weight", "5", "0.3", "--weight", "11", "0", "--weight", "12", "0"},
		}},
		{"uniform", msrUniform, []int{3, 4}, [][]string{
			nil,
			{"--weight", "1", "0", "--weight", "3", "0", "--weight", "4", "0", "--weight", "5", "0", "--weight", "9", "0.5"},
		}},
		{"skewed", msrSkewed, []int{3, 4}, [][]string{
			nil,
			{"--weight", "0", "0.5", "--weight", "4", "0"},
		}},
	}
}
