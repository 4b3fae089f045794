package monc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// decodeMonMapMessage parses the front of an MMonMap: the encoded
// MonMap as a length-prefixed blob.
func decodeMonMapMessage(b []byte) (*MonMap, error) {
	d := denc.NewDecoder(b)
	blob := d.Blob("MMonMap monmap")
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("monc: MMonMap: %w", err)
	}
	m, err := DecodeMonMap(blob)
	if err != nil {
		return nil, fmt.Errorf("monc: MMonMap: %w", err)
	}
	return m, nil
}
