//go:build race

package luks

// raceEnabled: the race detector keeps shadow memory for what the
// process allocated, resident whatever the heap gives back.
const raceEnabled = true
