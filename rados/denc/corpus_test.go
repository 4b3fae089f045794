package denc

import (
	"bytes"
	"testing"

	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

// roundTrip decodes b as exactly one T and re-encodes it.
func roundTrip[T Encodable, P Decodable[T]](b []byte) ([]byte, error) {
	v, err := Unmarshal[T, P](b)
	if err != nil {
		return nil, err
	}
	return Marshal(v), nil
}

// corpusTypes lists the corpus types this package decodes, each with a
// function that decodes a sample and re-encodes it.
var corpusTypes = []struct {
	typ       string
	roundTrip func([]byte) ([]byte, error)
}{
	{"entity_name_t", roundTrip[EntityName]},
	{"EntityName", roundTrip[AuthName]},
	{"entity_addr_t", roundTrip[EntityAddr]},
	{"entity_addrvec_t", roundTrip[EntityAddrVec]},
	{"entity_inst_t", roundTrip[EntityInst]},
	{"utime_t", roundTrip[UTime]},
	{"pg_t", roundTrip[PG]},
	{"spg_t", roundTrip[SPG]},
	{"object_locator_t", roundTrip[ObjectLocator]},
	{"SnapContext", roundTrip[SnapContext]},
	{"osd_reqid_t", roundTrip[ReqID]},
	{"pool_snap_info_t", roundTrip[PoolSnapInfo]},
}

// TestCorpus decodes every sample of every type above written by every
// Ceph version in the corpus, checks that all bytes are consumed, and that
// re-encoding gives back the same bytes.
func TestCorpus(t *testing.T) {
	total := 0
	for _, ct := range corpusTypes {
		t.Run(ct.typ, func(t *testing.T) {
			samples := corpus.ByVersion(t, ct.typ)
			n := 0
			for version, list := range samples {
				for i, b := range list {
					out, err := ct.roundTrip(b)
					if err != nil {
						t.Errorf("%s sample %d: %v\n% x", version, i, err, b)
						continue
					}
					if !bytes.Equal(out, b) {
						t.Errorf("%s sample %d: re-encoded differently\n got % x\nwant % x", version, i, out, b)
					}
					n++
				}
			}
			if n == 0 {
				t.Fatalf("no samples of %s in the corpus", ct.typ)
			}
			t.Logf("%s: %d samples from %d Ceph versions decode and re-encode identically", ct.typ, n, len(samples))
			total += n
		})
	}
	t.Logf("total: %d samples", total)
}
