package monc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// decodeConfigMessage parses the front of an MConfig: the options the
// monitors' central configuration holds for this client, name to value.
func decodeConfigMessage(b []byte) (map[string]string, error) {
	d := denc.NewDecoder(b)
	m := decodeStringMap(d, "MConfig config")
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("monc: MConfig: %w", err)
	}
	if m == nil {
		m = map[string]string{}
	}
	return m, nil
}
