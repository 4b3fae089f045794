package main

import "fmt"

// humanBytes formats like rbd's byte_u_t ("1 GiB", "4 MiB", "512 B",
// "2.5 MiB", "12 MiB"): an exact multiple of its unit without a
// fraction, otherwise the most decimals (two at most) that keep the
// number within three characters.
func humanBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u := 0
	for u < len(units)-1 && n >= uint64(1)<<(10*(u+1)) {
		u++
	}
	mult := uint64(1) << (10 * u)
	if n%mult == 0 {
		return fmt.Sprintf("%d %s", n/mult, units[u])
	}
	v := float64(n) / float64(mult)
	var s string
	for prec := 2; prec >= 0; prec-- {
		if s = fmt.Sprintf("%.*f", prec, v); len(s) <= 3 {
			break
		}
	}
	return s + " " + units[u]
}
