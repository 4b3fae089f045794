package main

import "fmt"

// humanBytes formats like rbd ("1 GiB", "4 MiB", "512 B").
func humanBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v == float64(uint64(v)) {
		return fmt.Sprintf("%d %s", uint64(v), units[u])
	}
	return fmt.Sprintf("%.3g %s", v, units[u])
}
