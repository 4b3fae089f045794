package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
)

// A record is one self-describing block of the size the caller picks:
//
//	magic [8] | index u64 | seed u64 | size u32 | ring u32 | sum [32] | payload
//
// (little-endian), where ring is the number of slots of the ring stream
// writes into (0 for write's plain sequence), payload is a pseudo-random
// stream drawn from the seed and the index, and sum is the SHA-256 of the
// first 32 header bytes and the payload. A record therefore says which
// write it was (index), which run wrote it (seed, ring), and whether any
// of its bytes changed since.
const headerSize = 64

// recordMagic starts every record; a slot without it was never written.
var recordMagic = [8]byte{'P', 'R', 'B', 'D', 'W', 'L', '0', '1'}

// minRecordSize is the smallest record: one sector.
const minRecordSize = 512

var (
	// errEmpty marks a slot that holds no record at all (no magic), as
	// a never-written area of a file or device reads.
	errEmpty = errors.New("no record (never written)")
	// errMissing marks a slot past the end of a file.
	errMissing = errors.New("missing")
	// errCorrupt marks a record whose checksum does not match its bytes.
	errCorrupt = errors.New("checksum mismatch")
)

// checkSize reports whether size can hold records: whole sectors.
func checkSize(size int) error {
	if size < minRecordSize || size%minRecordSize != 0 {
		return fmt.Errorf("record size %d: must be a positive multiple of %d", size, minRecordSize)
	}
	return nil
}

// recordID is what a record says about itself besides its payload.
type recordID struct {
	index uint64
	seed  uint64
	ring  uint32
}

// encodeRecord fills buf, whose length is the record size, with record
// id.index of the run id names.
func encodeRecord(buf []byte, id recordID) {
	index, seed := id.index, id.seed
	copy(buf[0:8], recordMagic[:])
	binary.LittleEndian.PutUint64(buf[8:16], index)
	binary.LittleEndian.PutUint64(buf[16:24], seed)
	binary.LittleEndian.PutUint32(buf[24:28], uint32(len(buf)))
	binary.LittleEndian.PutUint32(buf[28:32], id.ring)
	payload := buf[headerSize:]
	src := rand.NewPCG(seed, index)
	for i := 0; i+8 <= len(payload); i += 8 {
		binary.LittleEndian.PutUint64(payload[i:], src.Uint64())
	}
	sum := recordSum(buf)
	copy(buf[32:64], sum[:])
}

// recordSum is the checksum stored in a record: header fields and payload.
func recordSum(buf []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(buf[0:32])
	h.Write(buf[headerSize:])
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// decodeRecord checks that buf holds an intact record of buf's size and
// returns what it says about itself. The error says what is wrong:
// errEmpty, errCorrupt, or a record of another size.
func decodeRecord(buf []byte) (recordID, error) {
	if !bytes.Equal(buf[0:8], recordMagic[:]) {
		return recordID{}, errEmpty
	}
	sum := recordSum(buf)
	if !bytes.Equal(buf[32:64], sum[:]) {
		return recordID{}, errCorrupt
	}
	id := recordID{
		index: binary.LittleEndian.Uint64(buf[8:16]),
		seed:  binary.LittleEndian.Uint64(buf[16:24]),
		ring:  binary.LittleEndian.Uint32(buf[28:32]),
	}
	if got := binary.LittleEndian.Uint32(buf[24:28]); int(got) != len(buf) {
		return id, fmt.Errorf("record of size %d, want size %d", got, len(buf))
	}
	return id, nil
}

// checkRecord checks that buf holds the intact record want.
func checkRecord(buf []byte, want recordID) error {
	got, err := decodeRecord(buf)
	switch {
	case err != nil:
		return err
	case got.seed != want.seed:
		return fmt.Errorf("record of seed %d, want seed %d", got.seed, want.seed)
	case got.ring != want.ring:
		return fmt.Errorf("record of a ring of %d slots, want %d", got.ring, want.ring)
	case got.index != want.index:
		return fmt.Errorf("holds record %d", got.index)
	}
	return nil
}
