// Package buildinfo reports the version purerbd binaries were built as.
package buildinfo

import "runtime/debug"

// version is set at link time with -ldflags "-X ...buildinfo.version=v1.2.3".
var version = ""

// Version returns the link-time version, else the module version recorded
// by the Go toolchain, else "devel".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
