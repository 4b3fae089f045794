package cli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// sizeRE matches sizes such as 10, 4K, 4KiB, 1G, 512B.
var sizeRE = regexp.MustCompile(`^(?i)([0-9]+)\s*([KMGTP]?)(I?B)?$`)

// ParseSize reads a size as rbd takes one: a whole number with an
// optional binary suffix K, M, G, T or P (4K, 4KiB and 4KB are 4096), or
// B for bytes; a bare number counts units of unit bytes (rbd's --size
// counts MiB).
func ParseSize(s string, unit int64) (int64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("bad size %q", s)
	}
	mult := unit
	switch strings.ToUpper(m[2]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	case "P":
		mult = 1 << 50
	case "":
		if m[3] != "" {
			mult = 1
		}
	}
	v, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || v > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}
