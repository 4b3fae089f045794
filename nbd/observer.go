package nbd

import "time"

// Command is a transmission request type, as an Observer sees it.
type Command uint16

// The commands a Server serves.
const (
	CommandRead        Command = cmdRead
	CommandWrite       Command = cmdWrite
	CommandFlush       Command = cmdFlush
	CommandTrim        Command = cmdTrim
	CommandCache       Command = cmdCache
	CommandWriteZeroes Command = cmdWriteZeroes
	CommandBlockStatus Command = cmdBlockStatus
)

// String returns the command's name in lower case with underscores
// ("read", "write_zeroes"), fit for a metric label.
func (c Command) String() string {
	switch c {
	case CommandRead:
		return "read"
	case CommandWrite:
		return "write"
	case CommandFlush:
		return "flush"
	case CommandTrim:
		return "trim"
	case CommandCache:
		return "cache"
	case CommandWriteZeroes:
		return "write_zeroes"
	case CommandBlockStatus:
		return "block_status"
	}
	return "other"
}

// Observer is told of every request a Server serves in the transmission
// phase, for metrics. Its methods are called from the serving
// goroutines, concurrently, and must not block.
type Observer interface {
	// Started is called when a valid request's header has been read.
	Started(c Command)
	// Done is called when its reply has been handed to the writer (or the
	// request was abandoned: failed set): length is the request's length
	// field, d the time since Started.
	Done(c Command, length uint32, d time.Duration, failed bool)
}
