package diffstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
)

// event is a record with its data read, for comparisons.
type event struct {
	Tag            Tag
	Name           string
	Size           uint64
	Offset, Length uint64
	Data           []byte
}

// readAll reads a stream to its end record.
func readAll(b []byte) ([]event, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	var out []event
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		ev := event{Tag: rec.Tag, Name: rec.Name, Size: rec.Size, Offset: rec.Offset, Length: rec.Length}
		if rec.Data != nil {
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, rec.Data); err != nil {
				return out, err
			}
			if uint64(buf.Len()) != rec.Length {
				return out, io.ErrUnexpectedEOF
			}
			ev.Data = buf.Bytes()
		}
		out = append(out, ev)
	}
}

// writeAll writes events as a version 1 stream.
func writeAll(t *testing.T, evs []event) []byte {
	t.Helper()
	var h Header
	i := 0
	for ; i < len(evs); i++ {
		switch evs[i].Tag {
		case TagFromSnap:
			h.FromSnap = evs[i].Name
			continue
		case TagToSnap:
			h.ToSnap = evs[i].Name
			continue
		case TagSize:
			h.Size = evs[i].Size
			continue
		}
		break
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs[i:] {
		switch ev.Tag {
		case TagWrite:
			err = w.Write(ev.Offset, ev.Data)
		case TagZero:
			err = w.Zero(ev.Offset, ev.Length)
		case TagEnd:
			err = w.End()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func sampleV1(t *testing.T) []byte {
	return writeAll(t, []event{
		{Tag: TagFromSnap, Name: "s1"}, {Tag: TagToSnap, Name: "s2"}, {Tag: TagSize, Size: 8 << 20},
		{Tag: TagWrite, Offset: 4096, Length: 5, Data: []byte("hello")}, {Tag: TagZero, Offset: 1 << 20, Length: 1 << 20},
		{Tag: TagEnd},
	})
}

// sampleV2 is the same stream in version 2, with a record of an unknown
// tag the reader must skip.
func sampleV2() []byte {
	b := []byte(BannerV2)
	rec := func(tag byte, body []byte) {
		b = append(b, tag)
		b = binary.LittleEndian.AppendUint64(b, uint64(len(body)))
		b = append(b, body...)
	}
	name := func(s string) []byte { return append(binary.LittleEndian.AppendUint32(nil, uint32(len(s))), s...) }
	rec('f', name("s1"))
	rec('t', name("s2"))
	rec('s', binary.LittleEndian.AppendUint64(nil, 8<<20))
	rec('X', []byte("unknown"))
	rec('w', append(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 4096), 5), "hello"...))
	rec('z', binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 1<<20), 1<<20))
	return append(b, 'e')
}

func TestVersions(t *testing.T) {
	v1, err := readAll(sampleV1(t))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := readAll(sampleV2())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v1, v2) || len(v1) != 6 {
		t.Fatalf("v1 %+v\nv2 %+v", v1, v2)
	}
}

func TestMalformed(t *testing.T) {
	good := sampleV1(t)
	for name, b := range map[string][]byte{
		"banner":         []byte("rbd diff v3\n"),
		"truncated":      good[:len(good)-1],
		"short data":     good[:len(good)-20],
		"unknown tag v1": append(append([]byte{}, good[:len(good)-1]...), 'X'),
		"long name":      append([]byte(BannerV1+"f"), 0xff, 0xff, 0, 0),
	} {
		if _, err := readAll(b); err == nil || !errors.Is(err, ErrFormat) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzReader reads arbitrary streams: no panic, allocation bounded by
// the input, and what reads re-encodes (as version 1) to a stream that
// reads the same.
func FuzzReader(f *testing.F) {
	f.Add(sampleV1(&testing.T{}))
	f.Add(sampleV2())
	f.Fuzz(func(t *testing.T, b []byte) {
		var evs []event
		var err error
		alloctest.Check(t, len(b), func() { evs, err = readAll(b) })
		if err != nil || len(evs) == 0 {
			return
		}
		// version 1 wants the metadata first; skip streams that interleave
		seenData := false
		for _, ev := range evs {
			switch ev.Tag {
			case TagWrite, TagZero:
				seenData = true
			case TagFromSnap, TagToSnap, TagSize:
				if seenData {
					return
				}
			}
		}
		norm := normalize(evs)
		again, err := readAll(writeAll(t, norm))
		if err != nil || !reflect.DeepEqual(again, norm) {
			t.Fatalf("round trip: %+v -> %+v, %v", norm, again, err)
		}
	})
}

// normalize is what the writer makes of events: one from, to and size
// record each (the last given), in that order, size always.
func normalize(evs []event) []event {
	var from, to, data []event
	size := event{Tag: TagSize}
	for _, ev := range evs {
		switch ev.Tag {
		case TagFromSnap:
			if ev.Name != "" {
				from = []event{ev}
			} else {
				from = nil
			}
		case TagToSnap:
			if ev.Name != "" {
				to = []event{ev}
			} else {
				to = nil
			}
		case TagSize:
			size = ev
		default:
			if ev.Tag == TagWrite && len(ev.Data) == 0 {
				ev.Data = nil
			}
			data = append(data, ev)
		}
	}
	out := append(append(from, to...), size)
	return append(out, data...)
}
