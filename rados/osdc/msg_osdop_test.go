package osdc

import "testing"

// TestMOSDOpKnownDataCRC checks that a request whose only data is an
// operation's with a known crc hands that crc to the messenger, and that
// data laid end to end from several operations is checksummed there.
func TestMOSDOpKnownDataCRC(t *testing.T) {
	w := Write(0, []byte("frozen"))
	w.InDataCRC, w.InDataCRCKnown = 0x1234, true
	m := (&MOSDOp{OID: "o", Ops: []OSDOp{AssertExists(), w}}).Message()
	if !m.DataCRCKnown || m.DataCRC != 0x1234 || string(m.Data) != "frozen" {
		t.Errorf("one data operation: data %q, crc %#x known %v", m.Data, m.DataCRC, m.DataCRCKnown)
	}
	m = (&MOSDOp{OID: "o", Ops: []OSDOp{w, SetXattr("n", []byte("v"))}}).Message()
	if m.DataCRCKnown {
		t.Errorf("two data operations: the first one's crc %#x passed on for %q", m.DataCRC, m.Data)
	}
	m = (&MOSDOp{OID: "o", Ops: []OSDOp{Write(0, []byte("plain"))}}).Message()
	if m.DataCRCKnown {
		t.Error("a crc passed on that nobody knew")
	}
}

// TestSpliceWrites: a request's data goes by reference only when the
// objecter is configured for it and the data is one operation's own.
func TestSpliceWrites(t *testing.T) {
	one := &MOSDOp{OID: "o", Ops: []OSDOp{Write(0, make([]byte, 1<<20))}}
	two := &MOSDOp{OID: "o", Ops: []OSDOp{Write(0, make([]byte, 1<<20)), SetXattr("n", []byte("v"))}}
	for _, c := range []struct {
		splice bool
		m      *MOSDOp
		want   bool
	}{{false, one, false}, {true, one, true}, {true, two, false}} {
		o := &Objecter{cfg: Config{SpliceWrites: c.splice}}
		if got := o.message(c.m).SpliceData; got != c.want {
			t.Errorf("SpliceWrites %v, %d operations with data: SpliceData %v, want %v", c.splice, len(c.m.Ops), got, c.want)
		}
	}
}
