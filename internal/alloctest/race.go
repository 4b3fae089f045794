//go:build race

package alloctest

// RaceEnabled reports a build with the race detector, whose
// instrumentation allocates on its own account and keeps shadow memory
// resident for what the process allocated: heap counts and resident
// sizes say nothing about the code under it.
const RaceEnabled = true
