package bench

import (
	"bytes"
	"encoding/json"
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
	var busy, vm, osd float64
	w := newHostWatch(&out, func() (float64, error) { return osd, nil })
	w.now = func() time.Time { return clock }
	w.busy = func() (float64, error) { return busy, nil }
	w.vm = func() (float64, error) { return vm, nil }
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
	// 2 s later the host was busy 3.6 s, qemu 2 s, the OSD 0.5 s
	clock, busy, vm, osd = clock.Add(2*time.Second), 3.6, 2, 0.5
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
	if s.hostBusyCores() != 1.8 || s.hostVMCores() != 1 || s.hostOSDCores() != 0.25 || s.hostOSDPerOp() != 500 {
		t.Errorf("host figures: busy %v, qemu %v, OSD %v cores, %v µs per op", s.hostBusyCores(),
			s.hostVMCores(), s.hostOSDCores(), s.hostOSDPerOp())
	}
	var b bytes.Buffer
	writeHostCPU(&b, k.Sections[0])
	if want := "| 4k randread QD1 | purerbd | 1.80 | 1.00 | 1.50 | 0.25 | 500 |"; !strings.Contains(b.String(), want) {
		t.Errorf("host table lacks %q:\n%s", want, b.String())
	}
	// a console without marks leaves the section without the table
	k = &KernelVM{}
	k.parse(sample)
	if k.Sections[0].HostOf != "" {
		t.Error("HostOf set without host figures")
	}
}
