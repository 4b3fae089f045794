package main

import (
	"errors"
	"fmt"
	"time"
)

// verifyStreamOptions are the flags of verify-stream: the ring stream
// wrote, and the last index it reported as acknowledged (-1 when it
// acknowledged none; lastKnown false when not given, and then records
// can be checked for damage but not for loss).
type verifyStreamOptions struct {
	path      string
	size      int
	seed      uint64
	slots     int
	direct    bool
	lastIndex int64
	lastKnown bool
}

func (o verifyStreamOptions) check() error {
	if o.path == "" {
		return errors.New("--path is required")
	}
	if o.slots < 0 {
		return fmt.Errorf("--slots %d: must not be negative", o.slots)
	}
	if o.lastKnown && o.lastIndex < -1 {
		return fmt.Errorf("--last-index %d: must be -1 or more", o.lastIndex)
	}
	if err := checkSize(o.size); err != nil {
		return err
	}
	return checkDirect(o.size, o.direct)
}

// verifyStreamSummary is the JSON line verify-stream prints.
type verifyStreamSummary struct {
	Op         string  `json:"op"`
	Path       string  `json:"path"`
	Slots      int     `json:"slots"`
	LastIndex  int64   `json:"last_index"` // the highest intact record found, -1 for none
	Checked    int64   `json:"checked"`
	ElapsedMS  float64 `json:"elapsed_ms"`
	OK         bool    `json:"ok"`
	Bad        int64   `json:"bad,omitempty"`
	FirstBad   *int64  `json:"first_bad,omitempty"`
	FirstError string  `json:"first_error,omitempty"`
}

// verifyStream checks what stream left in the ring. The highest intact
// record found is taken as the last one written: it must be at least the
// last index stream acknowledged (when given: its final line's
// last_index, or any progress line's as a lower bound), and every record
// from the oldest the ring still holds up to it must be intact in its
// slot. The slot after the last record's is not checked: the one write
// that may have been in flight when stream stopped went there, and may
// have landed whole, not at all, or torn.
func verifyStream(o verifyStreamOptions) (verifyStreamSummary, error) {
	s := verifyStreamSummary{Op: "verify-stream", Path: o.path}
	f, err := openTarget(o.path, false, o.direct)
	if err != nil {
		return s, err
	}
	defer f.Close()
	slots := o.slots
	buf := alignedBuf(o.size)
	if slots == 0 {
		// The ring size stream used, as its first intact record says.
		// Slot 1 answers when a write in flight tore slot 0: only one
		// slot can be torn, and a ring has at least two.
		for slot := range 2 {
			if readRecord(f, buf, int64(slot)*int64(o.size)) != nil {
				continue
			}
			if id, err := decodeRecord(buf); err == nil {
				slots = int(id.ring)
				break
			}
		}
	}
	slots, err = streamSlots(f, o.size, slots)
	if err != nil {
		return s, err
	}
	s.Slots = slots
	start := time.Now()

	// Read the whole ring once: which index each slot holds, or why
	// it holds none.
	held := make([]int64, slots)
	last := int64(-1)
	why := make([]error, slots)
	for slot := range slots {
		held[slot] = -1
		err := readRecord(f, buf, int64(slot)*int64(o.size))
		if err == nil {
			var id recordID
			id, err = decodeRecord(buf)
			switch {
			case err != nil:
			case id.seed != o.seed:
				err = fmt.Errorf("record of seed %d, want seed %d", id.seed, o.seed)
			case id.ring != uint32(slots):
				err = fmt.Errorf("record of a ring of %d slots, want %d", id.ring, slots)
			case id.index%uint64(slots) != uint64(slot):
				err = fmt.Errorf("holds record %d, which belongs in slot %d", id.index, id.index%uint64(slots))
			default:
				held[slot] = int64(id.index)
				last = max(last, int64(id.index))
			}
		}
		why[slot] = err
	}

	s.LastIndex = last
	bad := func(index int64, err error) {
		s.Bad++
		if s.FirstBad == nil {
			s.FirstBad = &index
			s.FirstError = fmt.Sprintf("record %d: %v", index, err)
		}
	}
	if o.lastKnown && last < o.lastIndex {
		err := fmt.Errorf("lost: the highest intact record is %d, but stream acknowledged up to %d", last, o.lastIndex)
		if why := why[(last+1)%int64(slots)]; why != nil {
			err = fmt.Errorf("%w; its slot: %v", err, why)
		}
		bad(last+1, err)
	}
	// The slot after the last record's is the one a write in flight
	// may have torn: the oldest record checked is the one after it.
	oldest := max(0, last-int64(slots)+2)
	checked := make([]bool, slots)
	for index := oldest; index <= last; index++ {
		s.Checked++
		slot := index % int64(slots)
		checked[slot] = true
		switch {
		case held[slot] == index:
		case why[slot] != nil:
			bad(index, why[slot])
		default:
			bad(index, fmt.Errorf("slot %d holds record %d", slot, held[slot]))
		}
	}
	// Every other slot is the in-flight one or, while the ring has not
	// come round yet, one never written.
	for slot := range int64(slots) {
		if checked[slot] || slot == (last+1)%int64(slots) {
			continue
		}
		if why[slot] != nil && !errors.Is(why[slot], errEmpty) && !errors.Is(why[slot], errMissing) {
			bad(slot, fmt.Errorf("slot %d, never written, is not empty: %v", slot, why[slot]))
		}
	}
	s.ElapsedMS = ms(time.Since(start))
	s.OK = s.Bad == 0
	return s, nil
}
