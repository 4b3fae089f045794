package kernel

import (
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/nbd/kernel/internal/genl"
)

// FuzzParseStatusReply feeds STATUS answers, as datagrams, to the device
// list decoder.
func FuzzParseStatusReply(f *testing.F) {
	f.Add(unhex(f, cap61Status))
	f.Add(unhex(f, cap61Status+cap61StatusAck))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l []DeviceStatus
		var err error
		alloctest.Check(t, len(b), func() {
			var msgs []genl.Message
			if msgs, err = genl.ParseMessages(b); err == nil {
				l, err = parseStatusReply(msgs)
			}
		})
		if err != nil {
			return
		}
		for _, d := range l {
			if d.Index < 0 {
				t.Fatalf("negative index decoded: %+v", d)
			}
		}
	})
}

// FuzzParseConnectReply feeds CONNECT answers to the index decoder.
func FuzzParseConnectReply(f *testing.F) {
	f.Add(unhex(f, cap61ConnectRep))
	f.Add(unhex(f, cap61ConnectRep+cap61ConnectAck))
	f.Fuzz(func(t *testing.T, b []byte) {
		var i int
		var err error
		alloctest.Check(t, len(b), func() {
			var msgs []genl.Message
			if msgs, err = genl.ParseMessages(b); err == nil {
				i, err = parseConnectReply(msgs)
			}
		})
		if err == nil && i < 0 {
			t.Fatalf("negative index %d", i)
		}
	})
}

// FuzzParseLinkDead feeds multicast datagrams to the LINK_DEAD decoder.
func FuzzParseLinkDead(f *testing.F) {
	f.Add(unhex(f, cap61LinkDead1))
	f.Add(unhex(f, cap61Status))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l []int
		var err error
		alloctest.Check(t, len(b), func() {
			var msgs []genl.Message
			if msgs, err = genl.ParseMessages(b); err == nil {
				l, err = parseLinkDead(msgs)
			}
		})
		if err != nil {
			return
		}
		for _, i := range l {
			if i < 0 {
				t.Fatalf("negative index %d", i)
			}
		}
	})
}
