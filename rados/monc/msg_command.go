package monc

import (
	"fmt"

	"github.com/purerbd/purerbd/rados/denc"
)

// encodeCommand builds the front of an MMonCommand: the paxos header,
// the cluster fsid (the monitor refuses others) and the command strings.
// The input buffer travels in the message's data segment.
func encodeCommand(fsid denc.UUID, cmd []string) []byte {
	n := denc.PaxosHeaderLen + 16 + 4
	for _, s := range cmd {
		n += 4 + len(s)
	}
	e := denc.NewEncoder(make([]byte, 0, n))
	denc.EncodePaxosHeader(e, 0)
	fsid.Encode(e)
	encodeStrings(e, cmd)
	return e.Bytes()
}

// commandAck is MMonCommandAck: the return code (a negative errno), the
// status string and the command it answers. The output buffer is the
// message's data segment.
type commandAck struct {
	r   int32
	rs  string
	cmd []string
}

// decodeCommandAck parses the front of an MMonCommandAck.
func decodeCommandAck(b []byte) (commandAck, error) {
	var a commandAck
	d := denc.NewDecoder(b)
	denc.DecodePaxosHeader(d)
	a.r = d.I32("MMonCommandAck r")
	a.rs = d.String("MMonCommandAck rs")
	a.cmd = decodeStrings(d, "MMonCommandAck cmd")
	if err := d.Err(); err != nil {
		return commandAck{}, fmt.Errorf("monc: MMonCommandAck: %w", err)
	}
	return a, nil
}
