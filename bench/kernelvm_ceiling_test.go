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
		checkCeilings(t, k, wants...)
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

// TestKernelVMHostCeilings checks the depth-32 ceiling: the host's CPUs
// over the client alone plus the cheaper crossing alone, each in host
// cores at krbd's rate in its own group, with the OSD's CPU left out of
// the memory disks'.
func TestKernelVMHostCeilings(t *testing.T) {
	const qd32 = "4k randread QD32"
	// run is a 2-second run of ops operations during which qemu used vm
	// cores and the OSD osd cores
	run := func(ops int64, vm, osd float64) Sample {
		return Sample{Value: float64(ops) / 2, Ops: ops, Seconds: 2, HostSeconds: 2, HostVM: 2 * vm, HostOSD: 2 * osd}
	}
	sec := func(id string, runs map[string]Sample) *Section {
		c := &Case{Name: qd32, Unit: "IOPS", Samples: map[string][]Sample{}}
		var cont []string
		for who, s := range runs {
			c.Samples[who] = []Sample{s}
			if who != "krbd" {
				cont = append(cont, who)
			}
		}
		return &Section{ID: id, Contenders: append(cont, "krbd"), Cases: []*Case{c}}
	}
	mem := func(purerbdVM float64) *Section {
		s := sec("vm-memory", map[string]Sample{"purerbd": run(2000, purerbdVM, 0.5), "nbdkit": run(2000, 1, 0.5)})
		s.Contenders = []string{"purerbd", "nbdkit"}
		return s
	}
	krbd := run(1000, 0.5, 0.1) // 2 ms per op
	k := &KernelVM{HostCPUs: 2, Sections: []*Section{
		mem(1.2),
		// 1.8 cores at 300 ops/s: 6 ms per op, 3 cores at krbd's rate
		sec("vm-rbd", map[string]Sample{"purerbd": run(600, 1.5, 0.3), "krbd": krbd}),
		sec("vm-rbd-ublk", map[string]Sample{"purerbd": run(800, 1.6, 0.4), "krbd": krbd}),
		// 1 core at 1000 ops/s: 0.5 cores at krbd's rate
		sec("vm-rbd-client", map[string]Sample{"purerbd": run(2000, 0.8, 0.2), "krbd": krbd}),
		// the OSD's idle 0.5 cores are not the memory disk's
		sec("vm-floor-nbd", map[string]Sample{"nbdkit": run(2000, 1, 0.5), "krbd": krbd}),
		sec("vm-floor-ublk", map[string]Sample{"purerbd": run(2000, 1, 0.5), "krbd": krbd}),
	}}
	check := func(wants ...string) {
		t.Helper()
		checkCeilings(t, k, wants...)
	}
	// 0.5 + 0.5 cores at krbd's rate on 2 CPUs: ceiling 2.00
	check("on the host's 2 CPUs",
		"| nbd.ko | 4k randread QD32 | 0.50 | 0.50 | 1.00 | 3.00 | 2.00× | 0.60× | above the target |",
		"| ublk | 4k randread QD32 | 0.50 | 0.50 | 1.00 | 2.50 | 2.00× | 0.80× | above the target |")
	// purerbd's memory disk at 0.8 of nbdkit's cores: crossing 0.40
	k.Sections[0] = mem(0.8)
	check("| nbd.ko | 4k randread QD32 | 0.50 | 0.40 | 0.90 | 3.00 | 2.22× | 0.60× | above the target |")
	// one CPU and a dearer client: 0.7 + 0.5, ceiling 0.83
	k.Sections[0] = mem(1.2)
	k.HostCPUs = 1
	k.Sections[3] = sec("vm-rbd-client", map[string]Sample{"purerbd": run(2000, 1.2, 0.2), "krbd": krbd})
	check("| nbd.ko | 4k randread QD32 | 0.70 | 0.50 | 1.20 | 3.00 | 0.83× | 0.60× | above the target |",
		"| ublk | 4k randread QD32 | 0.70 | 0.50 | 1.20 | 2.50 | 0.83× | 0.80× | **below the target** |")
	// no depth-32 table without the host's CPU count or its figures
	for _, k := range []*KernelVM{
		{Sections: k.Sections},
		{HostCPUs: 2, Sections: []*Section{
			sec("vm-rbd", map[string]Sample{"purerbd": {Value: 300, Ops: 600, Seconds: 2}, "krbd": {Value: 500, Ops: 1000, Seconds: 2}}),
			sec("vm-rbd-client", map[string]Sample{"purerbd": {Value: 1000, Ops: 2000, Seconds: 2}, "krbd": {Value: 500, Ops: 1000, Seconds: 2}}),
			sec("vm-floor-nbd", map[string]Sample{"nbdkit": {Value: 1000, Ops: 2000, Seconds: 2}, "krbd": {Value: 500, Ops: 1000, Seconds: 2}}),
		}},
	} {
		var b bytes.Buffer
		k.writeCeilings(&b)
		if b.Len() != 0 {
			t.Errorf("a depth-32 ceiling without the host's CPUs or figures:\n%s", b.String())
		}
	}
}

// checkCeilings fails t unless k's ceiling tables hold every want.
func checkCeilings(t *testing.T, k *KernelVM, wants ...string) {
	t.Helper()
	var b bytes.Buffer
	k.writeCeilings(&b)
	for _, want := range wants {
		if !strings.Contains(b.String(), want) {
			t.Errorf("ceilings lack %q:\n%s", want, b.String())
		}
	}
}
