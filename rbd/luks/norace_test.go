//go:build !race

package luks

const raceEnabled = false
