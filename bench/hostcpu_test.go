package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purerbd/purerbd/bench/internal/guestbench"
)

// TestHostWatch feeds the watch a console with the guest's marks, cut
// across writes and behind kernel output, and checks each run's host
// figures, how they reach the samples, and the table.
func TestHostWatch(t *testing.T) {
	var out bytes.Buffer
	clock := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var busy, vm, vcpu, osd, packets, tlb float64
	w := newHostWatch(&out, func() (float64, error) { return osd, nil }, func() (float64, error) { return packets, nil })
	w.now = func() time.Time { return clock }
	w.busy = func() (float64, error) { return busy, nil }
	w.vm = func() (float64, error) { return vm, nil }
	w.vcpu = func() (float64, error) { return vcpu, nil }
	w.tlb = func() (float64, error) { return tlb, nil }
	line := func(prefix string, v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return prefix + string(b) + "\n"
	}
	mark := func(event string, rep int) string {
		return line(guestbench.PrefixMark, guestbench.MarkRecord{Event: event, Group: "rbd",
			Case: "4k randread QD1", Contender: "purerbd", Rep: rep})
	}
	sample := line(guestbench.PrefixSample, guestbench.SampleRecord{Group: "rbd", Case: "4k randread QD1",
		Unit: "IOPS", Contender: "purerbd", Rep: 1, Value: 500, Ops: 1000, Seconds: 2, CPU: 1,
		GuestCPU: 3, Switches: 4000, ServerSwitches: -1, ServerVoluntary: -1})

	start := mark(guestbench.MarkStart, 1)
	w.Write([]byte(start[:10]))
	w.Write([]byte(start[10:]))
	// 2 s later the host was busy 3.6 s, qemu 2 s (its vCPUs 1.6 s), the
	// OSD 0.5 s, 4500 packets went through the NIC and the emulator
	// flushed its TLB 9500 times
	clock, busy, vm, vcpu, osd, packets, tlb = clock.Add(2*time.Second), 3.6, 2, 1.6, 0.5, 4500, 9500
	w.Write([]byte("[   12.5] some kernel line\n" + sample + "[   12.6] x " + mark(guestbench.MarkEnd, 1)))
	// a run whose end never came, and an end with no start
	w.Write([]byte(mark(guestbench.MarkStart, 2) + mark(guestbench.MarkEnd, 3)))

	if !strings.Contains(out.String(), sample) {
		t.Fatalf("the console was not passed on:\n%s", out.String())
	}
	runs := w.results()
	if len(runs) != 1 {
		t.Fatalf("runs %v, want the first only", runs)
	}
	k := &KernelVM{}
	k.parseWith(out.String(), runs)
	if len(k.Sections) != 1 || k.Sections[0].HostOf == "" {
		t.Fatalf("sections %+v", k.Sections)
	}
	s := k.Sections[0].Cases[0].Samples["purerbd"][0]
	if s.hostBusyCores() != 1.8 || s.hostVMCores() != 1 || s.hostVCPUCores() != 0.8 || s.hostOSDCores() != 0.25 ||
		s.hostOSDPerOp() != 500 || s.hostPacketsPerOp() != 4.5 || s.hostTLBFlushesPerOp() != 9.5 {
		t.Errorf("host figures: busy %v, qemu %v, vCPUs %v, OSD %v cores, %v µs per op, %v packets, %v TLB flushes per op",
			s.hostBusyCores(), s.hostVMCores(), s.hostVCPUCores(), s.hostOSDCores(), s.hostOSDPerOp(), s.hostPacketsPerOp(),
			s.hostTLBFlushesPerOp())
	}
	var b bytes.Buffer
	writeHostCPU(&b, k.Sections[0])
	if want := "| 4k randread QD1 | purerbd | 1.80 | 1.00 | 0.8 | 1.50 | 0.25 | 500 | 4.50 | 9.50 |"; !strings.Contains(b.String(), want) {
		t.Errorf("host table lacks %q:\n%s", want, b.String())
	}
	// a console without marks leaves the section without the table
	k = &KernelVM{}
	k.parse(sample)
	if k.Sections[0].HostOf != "" {
		t.Error("HostOf set without host figures")
	}
}

// TestParseNetDevPackets reads an interface's packets both ways from
// /proc/net/dev as Linux writes it, and refuses a missing interface.
func TestParseNetDevPackets(t *testing.T) {
	dev := []byte(`Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1200      12    0    0    0     0          0         0     1200      12    0    0    0     0       0          0
purerbd-t0: 98765432  120345    0    0    0     0          0         0 87654321   98766    0    0    0     0       0          0
`)
	if n, err := parseNetDevPackets(dev, "purerbd-t0"); err != nil || n != 120345+98766 {
		t.Errorf("packets %v, %v; want %d", n, err, 120345+98766)
	}
	if _, err := parseNetDevPackets(dev, "tap9"); err == nil {
		t.Error("no error for an interface not there")
	}
	if n, err := netnsPackets(os.Getpid(), "lo"); err != nil || n < 0 {
		t.Errorf("this process's loopback: %v, %v", n, err)
	}
}
