package main

import "github.com/purerbd/purerbd/nbd/kernel/vmtest/guestio"

// streamChunk is the size of each synced write of the scenario's writers.
const streamChunk = 128 << 10

func startStreamWriter(path string) *guestio.StreamWriter {
	return guestio.StartStreamWriter(path, streamChunk)
}
