package denc

import (
	"fmt"
	"strconv"
	"strings"
)

// PG is Ceph's pg_t: a placement group, named by its pool and its seed
// (the placement seed, printed in hex: "2.1f").
//
// The encoding is a u8 version (1), u64 pool, u32 seed and an i32 that
// once held a preferred OSD and is always written as -1; Ceph ignores both
// the version and that field on decode, and so does this package.
type PG struct {
	Pool uint64
	Seed uint32
}

// Decode reads a pg_t.
func (p *PG) Decode(d *Decoder) {
	d.Skip("pg_t version", 1)
	p.Pool = d.U64("pg_t pool")
	p.Seed = d.U32("pg_t seed")
	d.Skip("pg_t preferred", 4)
}

// Encode writes a pg_t.
func (p PG) Encode(e *Encoder) {
	e.U8(1)
	e.U64(p.Pool)
	e.U32(p.Seed)
	e.I32(-1)
}

// String returns "pool.seed" with the seed in hex, as Ceph prints it.
func (p PG) String() string {
	return strconv.FormatUint(p.Pool, 10) + "." + strconv.FormatUint(uint64(p.Seed), 16)
}

// ParsePG parses "pool.seedhex" ("2.1f").
func ParsePG(s string) (PG, error) {
	pool, seed, ok := strings.Cut(s, ".")
	if !ok {
		return PG{}, fmt.Errorf("denc: pg %q: want pool.seed", s)
	}
	p, err := strconv.ParseUint(pool, 10, 64)
	if err != nil {
		return PG{}, fmt.Errorf("denc: pg %q: bad pool: %w", s, err)
	}
	v, err := strconv.ParseUint(seed, 16, 32)
	if err != nil {
		return PG{}, fmt.Errorf("denc: pg %q: bad seed: %w", s, err)
	}
	return PG{Pool: p, Seed: uint32(v)}, nil
}

// NoShard is the shard of a placement group in a replicated pool
// (shard_id_t::NO_SHARD).
const NoShard int8 = -1

// SPG is Ceph's spg_t: a placement group plus the erasure-code shard a
// message is about (NoShard for replicated pools). Versioned 1,1.
type SPG struct {
	PG    PG
	Shard int8
}

// Decode reads an spg_t.
func (s *SPG) Decode(d *Decoder) {
	d.Versioned("spg_t", 1, func(d *Decoder, _ uint8) {
		s.PG.Decode(d)
		s.Shard = d.I8("spg_t shard")
	})
}

// Encode writes an spg_t.
func (s SPG) Encode(e *Encoder) {
	e.Versioned(1, 1, func(e *Encoder) {
		s.PG.Encode(e)
		e.I8(s.Shard)
	})
}

// String returns "pool.seed", with "s<shard>" appended for a real shard.
func (s SPG) String() string {
	if s.Shard == NoShard {
		return s.PG.String()
	}
	return s.PG.String() + "s" + strconv.Itoa(int(uint8(s.Shard)))
}
