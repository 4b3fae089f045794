// Package shorttier defines this module's go test -short: the tier that
// runs with the Go toolchain alone, in seconds, on any machine. Under
// -short a test that needs anything else (Ceph daemons or tools, qemu,
// nbdkit and libnbd's tools, docker, python, root or a network namespace)
// is skipped through Skip. In a normal run Skip does nothing, and such a
// test fails when what it needs is missing: -short is the explicit opt-in
// to leave those out, never an implicit fallback.
package shorttier

import "testing"

// Skip skips tb under -short, saying what the test needs that the tier
// does not provide; in a normal run it does nothing, and outside go test
// (a program lending test machinery a testing.TB of its own, as the
// benchmark harness does) it does nothing either.
func Skip(tb testing.TB, needs string) {
	tb.Helper()
	if testing.Testing() && testing.Short() {
		tb.Skipf("needs %s: not in the -short tier", needs)
	}
}
