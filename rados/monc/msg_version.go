package monc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// encodeGetVersion builds the front of an MMonGetVersion: a handle the
// reply echoes and the map asked about ("osdmap", "monmap", ...).
func encodeGetVersion(handle uint64, what string) []byte {
	e := denc.NewEncoder(make([]byte, 0, 12+len(what)))
	e.U64(handle)
	e.String(what)
	return e.Bytes()
}

// versionReply is MMonGetVersionReply.
type versionReply struct {
	handle uint64
	newest uint64
	oldest uint64 // version 2 and later; 0 before
}

// decodeVersionReply parses the front of an MMonGetVersionReply.
func decodeVersionReply(b []byte, version uint16) (versionReply, error) {
	var r versionReply
	d := denc.NewDecoder(b)
	r.handle = d.U64("MMonGetVersionReply handle")
	r.newest = d.U64("MMonGetVersionReply version")
	if version >= 2 {
		r.oldest = d.U64("MMonGetVersionReply oldest_version")
	}
	if err := d.Err(); err != nil {
		return versionReply{}, fmt.Errorf("monc: MMonGetVersionReply: %w", err)
	}
	return r, nil
}
