package main

import "testing"

// TestHumanBytes: the sizes rbd du and rbd info print (seen from Ceph
// 16.2's rbd).
func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{
		512:                "512 B",
		8 << 20:            "8 MiB",
		2600000:            "2.5 MiB",
		4203:               "4.1 KiB",
		5210000:            "5.0 MiB",
		12940000:           "12 MiB",
		1 << 30:            "1 GiB",
		1023 * 1024 * 1024: "1023 MiB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
