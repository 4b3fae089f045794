package msgr

import (
	"bytes"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/crc32c"
)

// TestKnownDataCRC sends monitor commands whose input (the data segment)
// comes with its crc already known, as a rados.Frozen's writes do: the
// monitor takes the right one, and a wrong one, which only a Send that
// puts the caller's crc on the wire can produce, makes it drop the
// connection.
func TestKnownDataCRC(t *testing.T) {
	requireCluster(t)
	ctx := ctxT(t, 30*time.Second)
	value := bytes.Repeat([]byte("frozen "), 3000)
	set := func(c *Conn, tid uint64, crc uint32) error {
		m := monCommand(t, tid, `{"prefix":"config-key set","key":"purerbd-datacrc"}`)
		m.Data, m.DataCRC, m.DataCRCKnown = value, crc, true
		return c.Send(ctx, m)
	}

	c := dialMon(t, adminCephX(t), ModeCRC)
	if err := set(c, 1, crc32c.Checksum(value)); err != nil {
		t.Fatal(err)
	}
	if ack := receive(t, c, msgMonCommandAck); ack.Tid != 1 {
		t.Fatalf("ack of tid %d", ack.Tid)
	}
	if err := c.Send(ctx, monCommand(t, 2, `{"prefix":"config-key get","key":"purerbd-datacrc"}`)); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, c, msgMonCommandAck); !bytes.Equal(got.Data, value) {
		t.Fatalf("config-key get: %d bytes, want the %d set", len(got.Data), len(value))
	}

	bad := dialMon(t, adminCephX(t), ModeCRC)
	if err := set(bad, 1, crc32c.Checksum(value)^1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bad.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the monitor kept a connection that sent a wrong data crc")
	}

	// secure mode has no crcs: the known one is ignored
	sec := dialMon(t, adminCephX(t), ModeSecure)
	if err := set(sec, 1, 0); err != nil {
		t.Fatal(err)
	}
	if ack := receive(t, sec, msgMonCommandAck); ack.Tid != 1 {
		t.Fatalf("secure mode: ack of tid %d", ack.Tid)
	}
}
