package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestKernelVMCeilings checks the depth-1 ceiling: 1 over the client
// alone plus the faster crossing alone, each in krbd's latencies of its
// own group.
func TestKernelVMCeilings(t *testing.T) {
	// lat makes a one-case section with every contender's mean latency
	// (µs); the first contender is the one not named krbd
	lat := func(id, name string, us map[string]float64) *Section {
		c := &Case{Name: name, Unit: "IOPS", Samples: map[string][]Sample{}}
		var cont []string
		for who, v := range us {
			c.Samples[who] = []Sample{{Value: 1e6 / v, MeanLat: v * 1e3}}
			if who != "krbd" {
				cont = append(cont, who)
			}
		}
		return &Section{ID: id, Contenders: append(cont, "krbd"), Cases: []*Case{c}}
	}
	const qd1 = "4k randread QD1"
	mem := func(purerbd float64) *Section {
		s := lat("vm-memory", qd1, map[string]float64{"purerbd": purerbd, "nbdkit": 500})
		s.Contenders = []string{"purerbd", "nbdkit"}
		return s
	}
	k := &KernelVM{Sections: []*Section{
		mem(550),
		// krbd drifts between groups: each part counts against its own
		lat("vm-rbd", qd1, map[string]float64{"purerbd": 1500, "krbd": 750}),
		lat("vm-rbd-ublk", qd1, map[string]float64{"purerbd": 1400, "krbd": 700}),
		lat("vm-rbd-client", qd1, map[string]float64{"purerbd": 300, "krbd": 800}),
		lat("vm-floor-nbd", qd1, map[string]float64{"nbdkit": 500, "krbd": 800}),
		lat("vm-floor-ublk", qd1, map[string]float64{"purerbd": 600, "krbd": 960}),
	}}
	check := func(wants ...string) {
		t.Helper()
		var b bytes.Buffer
		k.writeCeilings(&b)
		for _, want := range wants {
			if !strings.Contains(b.String(), want) {
				t.Errorf("ceilings lack %q:\n%s", want, b.String())
			}
		}
	}
	// nbd.ko: client 300/800 plus nbdkit's crossing 500/800 (purerbd's
	// memory disk is slower) is 1.00: ceiling 1.00, measured 750/1500;
	// ublk: 0.375 + 600/960 = 1.00
	check("| nbd.ko | 4k randread QD1 | 0.38× | 0.62× | 1.00× | 2.00× | 1.00× | 0.50× | above the target |",
		"| ublk | 4k randread QD1 | 0.38× | 0.62× | 1.00× | 2.00× | 1.00× | 0.50× | above the target |")
	// purerbd's memory disk at 400 against nbdkit's 500 makes its crossing
	// 0.8 of nbdkit's: 0.375 + 0.5, ceiling 1.14
	k.Sections[0] = mem(400)
	check("| nbd.ko | 4k randread QD1 | 0.38× | 0.50× | 0.88× | 2.00× | 1.14× | 0.50× | above the target |")
	// a slower client: 700/800 + 0.5 = 1.375, ceiling 0.73 under 0.75
	k.Sections[3] = lat("vm-rbd-client", qd1, map[string]float64{"purerbd": 700, "krbd": 800})
	check("| nbd.ko | 4k randread QD1 | 0.88× | 0.50× | 1.38× | 2.00× | 0.73× | 0.50× | **below the target** |")
	// no table for depth 32, for 1 MiB, or without the client alone
	var b bytes.Buffer
	for _, name := range []string{"4k randread QD32", "1M seq read QD1"} {
		(&KernelVM{Sections: []*Section{
			lat("vm-rbd", name, map[string]float64{"purerbd": 1500, "krbd": 800}),
			lat("vm-rbd-client", name, map[string]float64{"purerbd": 300, "krbd": 800}),
			lat("vm-floor-nbd", name, map[string]float64{"nbdkit": 500, "krbd": 800}),
		}}).writeCeilings(&b)
	}
	(&KernelVM{Sections: k.Sections[:3]}).writeCeilings(&b)
	if b.Len() != 0 {
		t.Errorf("a ceiling table with no 4K depth-1 case or no client alone:\n%s", b.String())
	}
}
