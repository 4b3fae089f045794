package main

import (
	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
)

// cacheOption declares --rbd-cache (also spelled --rbd_cache, as Ceph's
// tools take it) on a verb that writes image data; *on is its default.
func cacheOption(cmd *cli.Command, on *bool) {
	cmd.Bool(on, "--rbd-cache", "librbd's write-around cache, as the rbd tool runs it (acknowledge writes ahead of the OSDs, up to 24 MiB; the verb flushes before it ends; --rbd-cache=false turns it off)")
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
