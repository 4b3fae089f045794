package bench

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestKernelVMParse turns a guest console into sections and the node
// record, and renders them.
func TestKernelVMParse(t *testing.T) {
	console := strings.Join([]string{
		"vmtest: init uptime=3.1",
		"CLOCK hpet",
		`SAMPLE {"group":"memory","case":"4k randread QD32","unit":"IOPS","contender":"purerbd","rep":1,"value":5000,"ops":10000,"bytes":40960000,"seconds":2,"cpu_s":1.5,"rss":31457280,"mean_ns":200000,"p50_ns":150000,"p99_ns":900000,"p999_ns":2000000}`,
		`SAMPLE {"group":"memory","case":"4k randread QD32","unit":"IOPS","contender":"nbdkit","rep":1,"value":4000,"ops":8000,"bytes":32768000,"seconds":2,"cpu_s":1,"rss":20971520,"mean_ns":250000,"p50_ns":200000,"p99_ns":1000000,"p999_ns":3000000}`,
		`SAMPLE {"group":"rbd","case":"4k randwrite QD32","unit":"IOPS","contender":"krbd","rep":1,"value":300,"ops":600,"bytes":2457600,"seconds":2,"cpu_s":-1}`,
		"NOTE memory: something odd",
		"[  275.347979] block nbd8: Connection timed out, retrying (4/4 alive)",
		"[  275.3] random other message",
		`NODE {"volumes":10,"stage_s":[1.5,1.2,1.1],"unstage_s":[0.2,0.3],"memory":[{"step":"1 staged","attached":1,"rss":20971520,"hwm":25165824},{"step":"10 staged","attached":10,"rss":41943040,"hwm":50331648}],"start_s":0.4,"volume_size":67108864,"fs_type":"ext4"}`,
		"RESULT ok",
	}, "\n")
	k := &KernelVM{CPUs: 2, MemoryMB: 1536}
	k.parse(console)
	if len(k.Sections) != 2 || k.Sections[0].ID != "vm-memory" || k.Sections[1].ID != "vm-rbd" {
		t.Fatalf("sections %+v", k.Sections)
	}
	c := k.Sections[0].Cases[0]
	if r := c.Ratio("purerbd", "nbdkit"); r != 1.25 {
		t.Errorf("ratio %v, want 1.25", r)
	}
	if p99 := c.medianLat("purerbd", 99); p99 != 900000 {
		t.Errorf("p99 %v", p99)
	}
	if cpu := k.Sections[1].Cases[0].Samples["krbd"][0].CPU; !math.IsNaN(cpu) {
		t.Errorf("krbd CPU %v, want NaN (the kernel serves)", cpu)
	}
	if k.Node == nil || k.rssAt(10) != 40<<20 || k.rssAt(1) != 20<<20 {
		t.Fatalf("node %+v", k.Node)
	}
	if len(k.Notes) != 2 || k.Notes[0] != "memory: something odd" ||
		k.Notes[1] != "guest kernel: `[  275.347979] block nbd8: Connection timed out, retrying (4/4 alive)`" {
		t.Errorf("notes %q", k.Notes)
	}
	var b bytes.Buffer
	k.write(&b)
	out := b.String()
	for _, want := range []string{
		"## Kernel path inside a VM (software-emulated)",
		"| 4k randread QD32 | IOPS | 5000 | 4000 | 1.25 |",
		"| 10 staged | 10 | 40.0 MiB | 48.0 MiB |",
		"RSS with 10 volumes attached ≤ 64 MiB: met (40.0 MiB)",
		"**Guest clock: hpet** (the kernel's choice",
		"| NodeStageVolume (ext4: attach, mkfs, mount) | 3 | 1200 ms | 1500 ms | 1100 ms | 1500 ms |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// TestKernelVMClients files the rbd-client group's records in two
// sections, each client against the same krbd runs; librbd's runs (a fio
// process each) carry no CPU figures.
func TestKernelVMClients(t *testing.T) {
	console := strings.Join([]string{
		`SAMPLE {"group":"rbd-client","case":"4k randread QD1","unit":"IOPS","contender":"purerbd","rep":1,"value":600,"ops":1200,"bytes":4915200,"seconds":2,"cpu_s":1.2,"guest_cpu_s":2.4,"ctxt":9000,"server_ctxt":4000,"server_ctxt_vol":3000,"server_ctxt_busiest":2000,"server_threads":3}`,
		`SAMPLE {"group":"rbd-client","case":"4k randread QD1","unit":"IOPS","contender":"librbd","rep":1,"value":500,"ops":1000,"bytes":4096000,"seconds":2,"cpu_s":-1,"guest_cpu_s":-1,"ctxt":-1,"server_ctxt":-1,"server_ctxt_vol":-1,"server_ctxt_busiest":-1,"server_threads":-1}`,
		`SAMPLE {"group":"rbd-client","case":"4k randread QD1","unit":"IOPS","contender":"krbd","rep":1,"value":800,"ops":1600,"bytes":6553600,"seconds":2,"cpu_s":-1,"guest_cpu_s":1.6,"ctxt":12000,"server_ctxt":-1,"server_ctxt_vol":-1,"server_ctxt_busiest":-1,"server_threads":-1}`,
		"RESULT ok",
	}, "\n")
	k := &KernelVM{CPUs: 2, MemoryMB: 1536}
	k.parse(console)
	if len(k.Sections) != 2 || k.Sections[0].ID != "vm-rbd-client" || k.Sections[1].ID != "vm-rbd-librbd" {
		t.Fatalf("sections %+v", k.Sections)
	}
	pc, lc := k.Sections[0].Cases[0], k.Sections[1].Cases[0]
	if r := pc.Ratio("purerbd", "krbd"); r != 0.75 {
		t.Errorf("purerbd/krbd %v, want 0.75", r)
	}
	if r := lc.Ratio("librbd", "krbd"); r != 0.625 {
		t.Errorf("librbd/krbd %v, want 0.625", r)
	}
	if _, ok := pc.Samples["librbd"]; ok {
		t.Error("librbd's runs in purerbd's section")
	}
	l := lc.Samples["librbd"][0]
	if !math.IsNaN(l.CPU) || !math.IsNaN(l.GuestCPU) || !math.IsNaN(l.ServerSwitches) {
		t.Errorf("librbd sample %+v: want no CPU or switches", l)
	}
	if p := pc.Samples["purerbd"][0]; p.CPU != 1.2 || p.GuestCPU != 2.4 || p.ServerVoluntary != 3000 {
		t.Errorf("purerbd sample %+v", p)
	}
	var b bytes.Buffer
	k.write(&b)
	for _, want := range []string{"| 4k randread QD1 | IOPS | 600 | 800 | **0.75** |", "| 4k randread QD1 | IOPS | 500 | 800 | **0.62** |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
}

// TestKernelVMFloors files the floor group's records: nbdkit's and
// purerbd's memory disks each against the same krbd runs, and no ublk
// section where the kernel had no ublk (krbd's runs alone).
func TestKernelVMFloors(t *testing.T) {
	rec := func(who string, v float64) string {
		return fmt.Sprintf(`SAMPLE {"group":"floor","case":"4k randread QD1","unit":"IOPS","contender":%q,"rep":1,"value":%v,"ops":1000,"bytes":4096000,"seconds":2,"cpu_s":-1,"guest_cpu_s":-1,"ctxt":-1,"server_ctxt":-1,"server_ctxt_vol":-1,"server_ctxt_busiest":-1,"server_threads":-1}`, who, v)
	}
	k := &KernelVM{}
	k.parse(strings.Join([]string{rec("nbdkit", 500), rec("purerbd", 700), rec("krbd", 1000)}, "\n"))
	if len(k.Sections) != 2 || k.Sections[0].ID != "vm-floor-nbd" || k.Sections[1].ID != "vm-floor-ublk" {
		t.Fatalf("sections %+v", k.Sections)
	}
	if r := k.Sections[0].Cases[0].Ratio("nbdkit", "krbd"); r != 0.5 {
		t.Errorf("nbdkit/krbd %v", r)
	}
	if r := k.Sections[1].Cases[0].Ratio("purerbd", "krbd"); r != 0.7 {
		t.Errorf("purerbd/krbd %v", r)
	}
	k = &KernelVM{}
	k.parse(strings.Join([]string{rec("nbdkit", 500), rec("krbd", 1000)}, "\n"))
	if len(k.Sections) != 1 || k.Sections[0].ID != "vm-floor-nbd" {
		t.Fatalf("without ublk: sections %+v", k.Sections)
	}
}

// TestKernelVMBounds checks the table that sets each device path beside
// its crossing's floor and the clients with no device.
func TestKernelVMBounds(t *testing.T) {
	sec := func(id, first string, v, krbd float64) *Section {
		c := krbdCase(v, krbd, 1)
		if first != "purerbd" {
			c.Samples[first] = c.Samples["purerbd"]
			delete(c.Samples, "purerbd")
		}
		return &Section{ID: id, Contenders: []string{first, "krbd"}, Cases: []*Case{c}}
	}
	k := &KernelVM{Sections: []*Section{
		sec("vm-rbd", "purerbd", 400, 1000), sec("vm-rbd-ublk", "purerbd", 350, 1000),
		sec("vm-rbd-client", "purerbd", 1200, 1000), sec("vm-rbd-librbd", "librbd", 600, 1000),
		sec("vm-floor-nbd", "nbdkit", 500, 1000),
	}}
	var b bytes.Buffer
	k.writeBounds(&b)
	want := "| 4k randread QD1 | 0.40× | 0.50× | 0.35× | – | 1.20× | 0.60× |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("bounds table lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	(&KernelVM{Sections: k.Sections[:2]}).writeBounds(&b)
	if b.Len() != 0 {
		t.Errorf("a bounds table with nothing to bound:\n%s", b.String())
	}
}

// krbdCase is a guest case of purerbd against krbd with the given
// medians and purerbd's CPU seconds per run of 1e6 ops.
func krbdCase(purerbd, krbd, cpu float64) *Case {
	c := synthCase("4k randread QD1", "IOPS", []float64{purerbd}, []float64{krbd}, cpu, 0)
	c.Samples["krbd"] = c.Samples["peer"]
	delete(c.Samples, "peer")
	return c
}

// TestKernelVMDevicePaths checks the table that sets ublk, nbd.ko and
// krbd of one VM run side by side, against the targets.
func TestKernelVMDevicePaths(t *testing.T) {
	k := &KernelVM{Kernel: "7.2.13", Sections: []*Section{
		{ID: "vm-rbd", Contenders: []string{"purerbd", "krbd"}, Cases: []*Case{krbdCase(400, 500, 1)}},
		{ID: "vm-rbd-ublk", Contenders: []string{"purerbd", "krbd"}, Cases: []*Case{krbdCase(300, 400, 2)}},
	}}
	// the whole guest's CPU per op: ublk 2.5 and nbd.ko 3 times krbd's
	for i, guest := range []float64{3, 2.5} {
		smp := k.Sections[i].Cases[0].Samples
		smp["purerbd"][0].GuestCPU, smp["krbd"][0].GuestCPU = guest, 1
	}
	var b bytes.Buffer
	k.writeDevicePaths(&b)
	// ublk 300/400, nbd.ko 400/500, ublk/nbd.ko 300/400, CPU 2/1
	want := "| 4k randread QD1 | 0.75× | 0.80× | 0.75× | 2.00× | 2.50× | 3.00× | ublk **not met**; nbd.ko met |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("device paths table lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	k.Sections = k.Sections[:1]
	k.writeDevicePaths(&b)
	if b.Len() != 0 {
		t.Errorf("a kernel without ublk got a device paths table:\n%s", b.String())
	}
}

// TestKernelVMClock: the section says which clocksource the guest ran on,
// and whether the bench chose it.
func TestKernelVMClock(t *testing.T) {
	for _, c := range []struct {
		k    KernelVM
		want string
	}{
		{KernelVM{}, ""},
		{KernelVM{Clocksource: "tsc", ClockForced: true}, "**Guest clock: tsc, kept with `tsc=reliable`**"},
		{KernelVM{Clocksource: "tsc"}, "**Guest clock: tsc.**"},
		{KernelVM{Clocksource: "acpi_pm"}, "**Guest clock: acpi_pm** (the kernel's choice"},
	} {
		var b bytes.Buffer
		c.k.writeClock(&b)
		if got := b.String(); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: wrote %q, want it to hold %q", c.k, got, c.want)
		}
	}
}

// TestKernelVMGuestCPU checks the whole guest's CPU and switches per op,
// the figures that count krbd's kernel work too: taken from the guest's
// records, left out where a record has none (an older guest), and set
// beside each other in the section.
func TestKernelVMGuestCPU(t *testing.T) {
	console := strings.Join([]string{
		`SAMPLE {"group":"rbd","case":"4k randread QD1","unit":"IOPS","contender":"purerbd","rep":1,"value":500,"ops":1000,"bytes":4096000,"seconds":2,"cpu_s":1,"guest_cpu_s":2,"ctxt":9000,"server_ctxt":2500,"server_ctxt_vol":2000,"server_ctxt_busiest":1200,"server_threads":5}`,
		`SAMPLE {"group":"rbd","case":"4k randread QD1","unit":"IOPS","contender":"krbd","rep":1,"value":1000,"ops":2000,"bytes":8192000,"seconds":2,"cpu_s":-1,"guest_cpu_s":1,"ctxt":6000}`,
		`SAMPLE {"group":"rbd","case":"4k randwrite QD1","unit":"IOPS","contender":"purerbd","rep":1,"value":500,"ops":1000,"bytes":4096000,"seconds":2,"cpu_s":1}`,
		`SAMPLE {"group":"rbd","case":"4k randwrite QD1","unit":"IOPS","contender":"krbd","rep":1,"value":500,"ops":1000,"bytes":4096000,"seconds":2,"cpu_s":-1,"guest_cpu_s":-1,"ctxt":-1}`,
		"RESULT ok",
	}, "\n")
	k := &KernelVM{CPUs: 2, MemoryMB: 1536}
	k.parse(console)
	if len(k.Sections) != 1 {
		t.Fatalf("sections %+v", k.Sections)
	}
	read, write := k.Sections[0].Cases[0], k.Sections[0].Cases[1]
	if v := read.Samples["krbd"][0].GuestCPUPerMop(); v != 500 {
		t.Errorf("krbd guest CPU %v s/Mop, want 500", v)
	}
	if v := read.Samples["purerbd"][0].SwitchesPerOp(); v != 9 {
		t.Errorf("purerbd switches per op %v, want 9", v)
	}
	for _, who := range []string{"purerbd", "krbd"} {
		if v := write.Samples[who][0].GuestCPUPerMop(); !math.IsNaN(v) {
			t.Errorf("%s guest CPU %v without a measure, want NaN", who, v)
		}
	}
	var b bytes.Buffer
	k.write(&b)
	out := b.String()
	for _, want := range []string{
		"The whole guest per op: the whole guest's busy CPU time",
		"| 4k randread QD1 | 2000 | 500 | **4.00** | 9.00 | 3.00 | **3.00** | 2.50 | – |",
		"| 4k randwrite QD1 | – | – | – | – | – | – | – | – |",
		"The serving process's own switches per op",
		"| 4k randread QD1 | purerbd | 2.50 | 2.00 | 1.20 | 5.00 |",
		"| 4k randwrite QD1 | purerbd | – | – | – | – |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| 4k randread QD1 | krbd |") {
		t.Errorf("krbd, which has no serving process, has a row of server threads:\n%s", out)
	}
}

// TestKernelVMServerEnv: a run whose servers had their environment tuned
// says so above its figures, and a default run says nothing.
func TestKernelVMServerEnv(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, ""},
		{[]string{"GOMAXPROCS=1", "GODEBUG=x=1"}, "**Tuned servers:** the guest's purerbd servers ran with `GOMAXPROCS=1 GODEBUG=x=1`"},
	} {
		k := &KernelVM{Kernel: "6.1", ServerEnv: c.env}
		var b bytes.Buffer
		k.write(&b)
		if got := b.String(); strings.Contains(got, "Tuned servers") != (c.want != "") || !strings.Contains(got, c.want) {
			t.Errorf("%q: wrote %q, want it to hold %q", c.env, got, c.want)
		}
	}
	// the same for the guest's kernel command line
	for _, args := range [][]string{nil, {"maxcpus=1"}} {
		k := &KernelVM{Kernel: "6.1", KernelArgs: args}
		var b bytes.Buffer
		k.write(&b)
		want := "**Tuned guest:** the guest's kernel booted with `maxcpus=1`"
		if got := b.String(); strings.Contains(got, "Tuned guest") != (args != nil) || (args != nil && !strings.Contains(got, want)) {
			t.Errorf("%q: wrote %q", args, got)
		}
	}
	// and for the experiments that are flags of their own: each banner
	// shows only with its flag
	for _, e := range []struct {
		name   string
		set    func(*KernelVM)
		banner string
	}{
		{"pinned", func(k *KernelVM) { k.Pinned = true }, "**Pinned:** the guest program ran on the first vCPU"},
		{"servers pinned", func(k *KernelVM) { k.ServerPinned = true }, "**Servers pinned:** every server ran on the second vCPU"},
		{"fio load", func(k *KernelVM) { k.FioLoaded = true }, "**Loaded by fio:** the block-device cases ran through fio"},
		{"traced", func(k *KernelVM) { k.Traced = true }, "**Traced:** the guest traced its context switches"},
	} {
		for _, on := range []bool{false, true} {
			k := &KernelVM{Kernel: "6.1"}
			if on {
				e.set(k)
			}
			var b bytes.Buffer
			k.write(&b)
			if got := b.String(); strings.Contains(got, e.banner) != on {
				t.Errorf("%s %v: wrote %q", e.name, on, got)
			}
		}
	}
	// the load's depth-1 calls: the banner shows for a section whose
	// calls went through the runtime (every run before RawDepth1 was
	// recorded), and not for one with no sections at all
	// and at depth 32: the banner shows for a section with raw depth-1
	// calls whose depth-32 requests went through goroutines (the runs
	// between the two changes); the depth-1 banner covers the runs
	// before both
	for _, e := range []struct {
		raw, aio, sections, banner1, banner32 bool
	}{
		{false, false, true, true, false},
		{true, false, true, false, true},
		{true, true, true, false, false},
		{false, false, false, false, false},
		{true, false, false, false, false},
	} {
		k := &KernelVM{Kernel: "6.1", RawDepth1: e.raw, AIODepth32: e.aio}
		if e.sections {
			k.Sections = []*Section{{ID: "vm-rbd", Title: "t", Contenders: []string{"purerbd", "krbd"}}}
		}
		var b bytes.Buffer
		k.write(&b)
		got := b.String()
		if strings.Contains(got, "**Depth 1 through the Go runtime:**") != e.banner1 ||
			strings.Contains(got, "**Depth 32 through goroutines:**") != e.banner32 {
			t.Errorf("raw %v, aio %v, sections %v: wrote %q", e.raw, e.aio, e.sections, got)
		}
	}
}
