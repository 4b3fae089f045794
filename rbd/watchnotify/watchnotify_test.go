package watchnotify

import (
	"bytes"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/rados/radostest/corpus"
	"github.com/purerbd/purerbd/rbd/internal/cls"
)

func TestCorpusNotify(t *testing.T) {
	ops := map[Op]bool{}
	for _, s := range corpus.Samples(t, "librbd__watch_notify__NotifyMessage") {
		m, err := ParseNotify(s.Data)
		if err != nil {
			t.Errorf("%s/%s: %v", s.Version, s.Name, err)
			continue
		}
		ops[m.Op] = true
		if m.Unknown != nil {
			t.Errorf("%s/%s: op %v not understood", s.Version, s.Name, m.Op)
		}
		if m.Version == Version {
			if out := m.Marshal(); !bytes.Equal(out, s.Data) {
				t.Errorf("%s/%s (%v): re-encoded differently\n got % x\nwant % x", s.Version, s.Name, m.Op, out, s.Data)
			}
		}
		switch m.Op {
		case OpAcquiredLock, OpReleasedLock:
			if m.Client != (ClientID{1, 2}) {
				t.Errorf("%v client %v", m.Op, m.Client)
			}
		case OpSnapCreate:
			if m.SnapName != "foo" || m.Async.RequestID != 2 || m.Flags != 1 || m.SnapNamespace.Type != cls.NamespaceUser {
				t.Errorf("snap create %+v", m)
			}
		}
	}
	for _, op := range []Op{OpAcquiredLock, OpReleasedLock, OpHeaderUpdate} {
		if !ops[op] {
			t.Errorf("no %v sample", op)
		}
	}
}

func TestCorpusResponse(t *testing.T) {
	for _, s := range corpus.Samples(t, "librbd__watch_notify__ResponseMessage") {
		r, err := ParseResponse(s.Data)
		if err != nil || r.Result != 1 {
			t.Errorf("%s/%s: %+v %v", s.Version, s.Name, r, err)
		}
		if !bytes.Equal(r.Marshal(), s.Data) {
			t.Errorf("%s/%s: re-encoded differently", s.Version, s.Name)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	v := "x"
	for _, m := range []NotifyMessage{
		{Op: OpRequestLock, Client: ClientID{4123, 94}, Force: true},
		{Op: OpAcquiredLock, Client: ClientID{4123, 94}},
		{Op: OpHeaderUpdate},
		{Op: OpResize, Size: 1 << 30, AllowShrink: true, Async: AsyncRequestID{ClientID{1, 2}, 3}},
		{Op: OpSnapRename, SnapID: 4, SnapName: "a", Async: AsyncRequestID{ClientID{1, 2}, 3}},
		{Op: OpMetadataUpdate, Key: "k", Value: &v},
		{Op: 99, Unknown: []byte{1, 2, 3}},
	} {
		b := m.Marshal()
		got, err := ParseNotify(b)
		if err != nil {
			t.Fatalf("%v: %v", m.Op, err)
		}
		if !bytes.Equal(got.Marshal(), b) {
			t.Errorf("%v: unstable", m.Op)
		}
	}
	if m, err := ParseNotify(nil); err != nil || m.Op != OpHeaderUpdate {
		t.Errorf("legacy empty notify: %v %v", m.Op, err)
	}
}

func FuzzNotify(f *testing.F) {
	f.Add(NotifyMessage{Op: OpRequestLock, Client: ClientID{1, 2}}.Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		var m NotifyMessage
		var err error
		alloctest.Check(t, len(b), func() { m, err = ParseNotify(b) })
		if err != nil || len(b) == 0 {
			return
		}
		once := m.Marshal()
		m2, err := ParseNotify(once)
		if err != nil {
			t.Fatalf("re-encoding % x does not decode: %v", once, err)
		}
		if !bytes.Equal(m2.Marshal(), once) {
			t.Fatal("unstable")
		}
	})
}

func FuzzResponse(f *testing.F) {
	f.Add(ResponseMessage{Result: -16}.Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		var r ResponseMessage
		var err error
		alloctest.Check(t, len(b), func() { r, err = ParseResponse(b) })
		if err != nil {
			return
		}
		if _, err := ParseResponse(r.Marshal()); err != nil {
			t.Fatal(err)
		}
	})
}
