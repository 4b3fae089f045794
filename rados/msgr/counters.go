package msgr

import "sync/atomic"

// Counters count the messages connections wrote and the writes that
// carried them. Connections configured with the same Counters
// (Config.Counters) add to them, so a client that dials many peers reads
// one total; its methods are safe for concurrent use. The zero value is
// ready.
type Counters struct {
	writes, messages, bytes atomic.Uint64
}

// WriteCounts is a reading of Counters.
type WriteCounts struct {
	// Writes are the batches of messages written: the messages queued
	// together go out in one writev (more than one when the socket's
	// buffer takes the batch in parts, or when a data segment is
	// spliced). Messages/Writes is how well sends batch.
	Writes uint64
	// Messages are the messages written.
	Messages uint64
	// Bytes are the bytes of the frames that carried them.
	Bytes uint64
}

// Load reads the counters.
func (c *Counters) Load() WriteCounts {
	return WriteCounts{Writes: c.writes.Load(), Messages: c.messages.Load(), Bytes: c.bytes.Load()}
}

// wrote counts a batch of messages written; c may be nil.
func (c *Counters) wrote(messages, bytes int) {
	if c == nil {
		return
	}
	c.writes.Add(1)
	c.messages.Add(uint64(messages))
	c.bytes.Add(uint64(bytes))
}
