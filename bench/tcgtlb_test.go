package bench

import "testing"

// infoJit is qemu 7.2's `info jit` as its monitor sends it over a
// socket: the command's echo, drawn with the line editor's escapes,
// then the report.
const infoJit = "i\x1b[K\x1b[Din\x1b[K\x1b[D\x1b[Dinfo jit\x1b[K\r\n" +
	"Translation buffer state:\r\ngen code size       31447603/1073736704\r\nTB count            160817\r\n" +
	"\r\nStatistics:\r\nTB flush count      0\r\nTB invalidate count 12\r\n" +
	"TLB full flushes    3\r\nTLB partial flushes 190392\r\nTLB elided flushes  20554\r\n" +
	"[TCG profiler not compiled]\r\n(qemu) "

func TestParseTLBFlushes(t *testing.T) {
	n, err := parseTLBFlushes(infoJit)
	if err != nil || n != 190395 {
		t.Errorf("parseTLBFlushes = %v, %v; want the full and partial flushes, 190395", n, err)
	}
	for _, bad := range []string{"", "unknown command: 'info jit'\r\n(qemu) ",
		"TLB full flushes    3\r\n(qemu) ", "TLB full flushes    3\r\nTLB partial flushes 99999999999999999999\r\n"} {
		if n, err := parseTLBFlushes(bad); err == nil {
			t.Errorf("parseTLBFlushes(%q) = %v, want an error", bad, n)
		}
	}
}
