package chaostest

import (
	"fmt"
	"slices"
	"sync"
)

// version is one write of one block: its number and whether it made the
// block read as zeroes (a discard) rather than hold data.
type version struct {
	n    uint64
	zero bool
}

// blockState is what the model knows of one block.
type blockState struct {
	acked   version   // the last acknowledged write (initially 0: zeroes)
	pending []version // later writes in flight or failed: they may have landed
	last    uint64    // the highest version issued
	busy    bool      // an operation owns the block
}

// model is the expected content of one image, block by block. Operations
// reserve the blocks they touch, so that no two operations on one block
// are ever in flight together (as a file system never issues them): what
// a block may hold is then exactly its last acknowledged version plus its
// pending ones.
type model struct {
	image     string
	seed, tag uint64
	mu        sync.Mutex
	blocks    []blockState
	lost      map[int]string // block -> first finding
	corrupt   map[int]string
}

func newModel(image string, seed uint64, size int64) *model {
	tag := splitmix64(seed ^ 0x6368616f73)
	for _, c := range []byte(image) {
		tag = splitmix64(tag ^ uint64(c))
	}
	m := &model{
		image: image, seed: seed, tag: tag,
		blocks:  make([]blockState, size/BlockSize),
		lost:    map[int]string{},
		corrupt: map[int]string{},
	}
	for i := range m.blocks {
		m.blocks[i].acked.zero = true // a new image reads as zeroes
	}
	return m
}

// numBlocks is the number of blocks in the image.
func (m *model) numBlocks() int { return len(m.blocks) }

// reserve takes blocks [first, first+n) for one operation, or reports
// that one of them is busy.
func (m *model) reserve(first, n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := first; i < first+n; i++ {
		if m.blocks[i].busy {
			return false
		}
	}
	for i := first; i < first+n; i++ {
		m.blocks[i].busy = true
	}
	return true
}

func (m *model) release(first, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := first; i < first+n; i++ {
		m.blocks[i].busy = false
	}
}

// beginWrite issues the next version of each block of a reserved range
// and returns the buffer to write: the blocks' data, or nil for zeroes.
func (m *model) beginWrite(first, n int, zero bool) ([]version, []byte) {
	m.mu.Lock()
	vers := make([]version, n)
	for i := range vers {
		b := &m.blocks[first+i]
		b.last++
		vers[i] = version{n: b.last, zero: zero}
		b.pending = append(b.pending, vers[i])
	}
	m.mu.Unlock()
	if zero {
		return vers, nil
	}
	buf := make([]byte, n*BlockSize)
	for i, v := range vers {
		fillBlock(buf[i*BlockSize:(i+1)*BlockSize], m.seed, m.tag, uint64(first+i)*BlockSize, v.n)
	}
	return vers, buf
}

// endWrite records the outcome of a write begun with beginWrite. An
// acknowledged write supersedes everything before it; a failed one stays
// pending until a later write of the block is acknowledged.
func (m *model) endWrite(first int, vers []version, ok bool) {
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, v := range vers {
		b := &m.blocks[first+i]
		b.acked = v
		b.pending = slices.DeleteFunc(b.pending, func(p version) bool { return p.n <= v.n })
	}
}

// check verifies data read from blocks [first, first+len(data)/BlockSize)
// (reserved by the caller, or quiescent) and records what is wrong. It
// returns the number of lost and corrupt blocks found in this read, with
// a description of the first one.
func (m *model) check(first int, data []byte, via string) (lost, corrupt int, first1 string) {
	n := len(data) / BlockSize
	for i := 0; i < n; i++ {
		blk := first + i
		got := decodeBlock(data[i*BlockSize:(i+1)*BlockSize], m.seed, m.tag, uint64(blk)*BlockSize)
		m.mu.Lock()
		kind, why := m.judge(&m.blocks[blk], got)
		if kind != "" {
			msg := fmt.Sprintf("%s block %d (offset %d) via %s: %s", m.image, blk, int64(blk)*BlockSize, via, why)
			switch kind {
			case "lost":
				lost++
				if _, seen := m.lost[blk]; !seen {
					m.lost[blk] = msg
				}
			case "corrupt":
				corrupt++
				if _, seen := m.corrupt[blk]; !seen {
					m.corrupt[blk] = msg
				}
			}
			if first1 == "" {
				first1 = msg
			}
		}
		m.mu.Unlock()
	}
	return lost, corrupt, first1
}

// judge compares what a block holds with what it may hold: "" when
// acceptable, else "lost" or "corrupt" and why.
func (m *model) judge(b *blockState, got blockContent) (string, string) {
	may := append([]version{b.acked}, b.pending...)
	want := fmt.Sprintf("acknowledged %s", describe(b.acked))
	if len(b.pending) > 0 {
		want += fmt.Sprintf(", or %d unacknowledged later version(s) up to %s", len(b.pending), describe(b.pending[len(b.pending)-1]))
	}
	switch {
	case got.bad != "":
		return "corrupt", fmt.Sprintf("%s; expected %s", got.bad, want)
	case got.zero:
		for _, v := range may {
			if v.zero {
				return "", ""
			}
		}
		return "lost", fmt.Sprintf("reads as zeroes; expected %s", want)
	}
	for _, v := range may {
		if v.n == got.version && !v.zero {
			return "", ""
		}
	}
	switch {
	case got.version < b.acked.n:
		return "lost", fmt.Sprintf("holds older version %d; expected %s", got.version, want)
	case got.version > b.last:
		return "corrupt", fmt.Sprintf("holds version %d, never written (last issued %d)", got.version, b.last)
	default:
		return "corrupt", fmt.Sprintf("holds version %d, superseded or a discard; expected %s", got.version, want)
	}
}

func describe(v version) string {
	switch {
	case v.n == 0:
		return "never written (zeroes)"
	case v.zero:
		return fmt.Sprintf("version %d (discarded: zeroes)", v.n)
	default:
		return fmt.Sprintf("version %d", v.n)
	}
}

// findings returns the lost and corrupt blocks found so far.
func (m *model) findings() (lost, corrupt []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range sortedKeys(m.lost) {
		lost = append(lost, m.lost[k])
	}
	for _, k := range sortedKeys(m.corrupt) {
		corrupt = append(corrupt, m.corrupt[k])
	}
	return lost, corrupt
}

func sortedKeys(m map[int]string) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
