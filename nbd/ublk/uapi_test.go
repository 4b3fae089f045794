package ublk

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/purerbd/purerbd/internal/alloctest"
	"github.com/purerbd/purerbd/nbd"
)

// TestCommandNumbers checks the ioctl encoding against the values the
// kernel's header spells out (UBLK_U_CMD_ADD_DEV is _IOWR('u', 0x04,
// struct ublksrv_ctrl_cmd), UBLK_U_IO_FETCH_REQ _IOWR('u', 0x20, struct
// ublksrv_io_cmd), UBLK_U_CMD_GET_FEATURES _IOR('u', 0x13, ...)).
func TestCommandNumbers(t *testing.T) {
	for _, c := range []struct {
		name string
		got  uint32
		want uint32
	}{
		{"ADD_DEV", ctrlOp(cmdAddDev, true), 0xc0207504},
		{"GET_DEV_INFO", ctrlOp(cmdGetDevInfo, true), 0x80207502},
		{"GET_FEATURES", ctrlOp(cmdGetFeatures, true), 0x80207513},
		{"END_USER_RECOVERY", ctrlOp(cmdEndUserRecovery, true), 0xc0207511},
		{"UPDATE_SIZE", ctrlOp(cmdUpdateSize, true), 0xc0207515},
		{"FETCH_REQ", ioOp(ioFetchReq, true), 0xc0107520},
		{"COMMIT_AND_FETCH_REQ", ioOp(ioCommitAndFetch, true), 0xc0107521},
		{"legacy START_DEV", ctrlOp(cmdStartDev, false), 0x06},
		{"legacy FETCH_REQ", ioOp(ioFetchReq, false), 0x20},
	} {
		if c.got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

func TestParamsLayout(t *testing.T) {
	p := Params{Attrs: attrVolatileCache, LogicalBSShift: 12, PhysicalBSShift: 12, MaxSectors: 1024,
		DevSectors: 1 << 21, DiscardGranularity: 4096, MaxDiscardSectors: 8, MaxWriteZeroes: 16}
	b := p.encode()
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != paramsSize || le.Uint32(b[4:]) != paramTypeBasic|paramTypeDiscard {
		t.Fatalf("header %x", b[:8])
	}
	if b[12] != 12 || le.Uint32(b[16:]) != 1024 || le.Uint64(b[24:]) != 1<<21 {
		t.Fatalf("basic %x", b[8:40])
	}
	if le.Uint32(b[44:]) != 4096 || le.Uint32(b[48:]) != 8 || le.Uint32(b[52:]) != 16 || le.Uint16(b[56:]) != 1 {
		t.Fatalf("discard %x", b[40:60])
	}
	if le.Uint32(Params{}.encode()[4:]) != paramTypeBasic {
		t.Fatal("discard parameters sent without a granularity")
	}
}

func TestDevInfoRoundTrip(t *testing.T) {
	in := DevInfo{Queues: 2, QueueDepth: 64, State: StateQuiesced, MaxIOBufBytes: 512 << 10, ID: 3, ServerPID: 77,
		Flags: FlagUserRecovery | FlagUserRecoveryReissue | FlagCmdIoctlEncode, Tag: 0x0123456789abcdef, OwnerUID: 5, OwnerGID: 6}
	out, err := decodeDevInfo(in.encode())
	if err != nil || out != in {
		t.Fatalf("decoded %+v (%v), want %+v", out, err, in)
	}
	if _, err := decodeDevInfo(in.encode()[:63]); err == nil {
		t.Fatal("short device info accepted")
	}
	bad := in
	bad.QueueDepth = maxQueueDepth + 1
	if _, err := decodeDevInfo(bad.encode()); err == nil {
		t.Fatal("queue depth beyond the kernel's limit accepted")
	}
}

// FuzzDecodeDevInfo feeds device info blocks (the kernel's answer to
// ADD_DEV and GET_DEV_INFO) to their decoder.
func FuzzDecodeDevInfo(f *testing.F) {
	f.Add(DevInfo{Queues: 1, QueueDepth: 64, MaxIOBufBytes: 512 << 10, Flags: 0x5a}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		var d DevInfo
		var err error
		alloctest.Check(t, len(b), func() { d, err = decodeDevInfo(b) })
		if err != nil {
			return
		}
		if d.QueueDepth == 0 || d.QueueDepth > maxQueueDepth || d.Queues == 0 {
			t.Fatalf("decoded an unusable device: %+v", d)
		}
		if again, err := decodeDevInfo(d.encode()); err != nil || again.Queues != d.Queues || again.Flags != d.Flags {
			t.Fatalf("re-encoding %+v decodes as %+v (%v)", d, again, err)
		}
	})
}

// FuzzServeDesc feeds request descriptors (what the kernel writes in
// the shared array) to their decoder and to a queue serving a small
// Memory backend: whatever the bytes, the request is refused or served
// within the backend and the tag's buffer, and reads and writes report
// their full length.
func FuzzServeDesc(f *testing.F) {
	d := make([]byte, ioDescSize+1)
	binary.LittleEndian.PutUint32(d[0:], opWrite|ioFlagFUA)
	binary.LittleEndian.PutUint32(d[4:], 8)
	binary.LittleEndian.PutUint64(d[8:], 2048)
	f.Add(d)
	mem, err := nbd.NewMemory(1 << 20)
	if err != nil {
		f.Fatal(err)
	}
	const depth, maxIO = 4, 64 << 10
	q := &queue{depth: depth, maxIO: maxIO, bufs: make([]byte, depth*maxIO), backend: mem}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < ioDescSize+1 {
			return
		}
		var desc ioDesc
		alloctest.Check(t, ioDescSize, func() { desc = decodeIODesc(b) })
		if uint32(desc.op)|desc.flags<<8 != binary.LittleEndian.Uint32(b) {
			t.Fatalf("op %d flags %#x do not rebuild %#x", desc.op, desc.flags, binary.LittleEndian.Uint32(b))
		}
		res := q.serve(context.Background(), int(b[ioDescSize])%depth, desc)
		if res < 0 {
			return
		}
		if desc.op == opFlush {
			return
		}
		end := desc.startSector<<sectorShift + uint64(desc.nrSectors)<<sectorShift
		if end > uint64(mem.Size()) || desc.startSector > uint64(mem.Size()) {
			t.Fatalf("request %+v beyond the backend served: %d", desc, res)
		}
		if (desc.op == opRead || desc.op == opWrite) && res != int32(desc.nrSectors)<<sectorShift {
			t.Fatalf("request %+v served with result %d", desc, res)
		}
	})
}

// TestParamsWholeBlocks checks that a backend whose size is no multiple
// of the block size gets a device of its whole blocks.
func TestParamsWholeBlocks(t *testing.T) {
	mem, err := nbd.NewMemory(1<<20 + 1000)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Backend: mem}
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	if p := paramsFor(cfg, DefaultMaxIOBytes); p.DevSectors != (1<<20)>>sectorShift {
		t.Fatalf("%d sectors for a backend of 1 MiB + 1000 bytes, want %d", p.DevSectors, (1<<20)>>sectorShift)
	}
	cfg.BlockSize = 512
	if p := paramsFor(cfg, DefaultMaxIOBytes); p.DevSectors != (1<<20+512)>>sectorShift {
		t.Fatalf("%d sectors with 512-byte blocks, want %d", p.DevSectors, (1<<20+512)>>sectorShift)
	}
}
