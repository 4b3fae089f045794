//go:build !race

package alloctest

const RaceEnabled = false
