//go:build race

package alloctest

// raceEnabled: the race detector's instrumentation allocates on its own
// account, so heap counts say nothing about a decoder under it.
const raceEnabled = true
