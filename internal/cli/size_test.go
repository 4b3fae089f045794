package cli

import "testing"

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		def  int64
		want int64
	}{
		{"1024", 1 << 20, 1 << 30}, {"1G", 1 << 20, 1 << 30}, {"4K", 1, 4096}, {"4KiB", 1, 4096},
		{"512B", 1 << 20, 512}, {"10", 1, 10}, {"2t", 1, 2 << 40}, {"64M", 1, 64 << 20},
	} {
		got, err := ParseSize(c.in, c.def)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "x", "1X", "-1", "1.5G"} {
		if _, err := ParseSize(bad, 1); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}
