package main

import (
	"flag"

	"github.com/purerbd/purerbd/rbd"
)

// cacheFlag registers --rbd-cache (also spelled --rbd_cache, as Ceph's
// tools take it) on a verb that writes image data.
func cacheFlag(fs *flag.FlagSet) *bool {
	on := new(bool)
	usage := "librbd's write-around cache, as the rbd tool runs it (acknowledge writes ahead of the OSDs, up to 24 MiB; the verb flushes before it ends)"
	fs.BoolVar(on, "rbd-cache", true, usage)
	fs.BoolVar(on, "rbd_cache", true, "same as --rbd-cache")
	return on
}

// cliWriteAround is the cache setting of the rbd tool: librbd's default
// write-around cache, on from the first write (the tool turns
// rbd_cache_writethrough_until_flush off).
func cliWriteAround(on bool) rbd.WriteAround {
	if !on {
		return rbd.WriteAround{}
	}
	return rbd.WriteAround{MaxDirty: rbd.DefaultMaxDirty}
}
