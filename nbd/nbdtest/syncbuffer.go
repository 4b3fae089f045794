package nbdtest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe for concurrent use: where a test
// collects a server's log or a command's output while it runs.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
