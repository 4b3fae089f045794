package rados

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
	"github.com/purerbd/purerbd/rados/osdc"
)

// Pool operations (MPoolOp): self-managed snapshot ids come from the
// monitors through these messages, sent over the Conn's monitor session
// (monc.Client.Request), which resends them after a failover.

const (
	msgPoolOpReply = 48 // CEPH_MSG_POOLOP_REPLY
	msgPoolOp      = 49 // CEPH_MSG_POOLOP

	poolOpCreateUnmanagedSnap uint32 = 0x21
	poolOpDeleteUnmanagedSnap uint32 = 0x22

	poolOpTimeout = 30 * time.Second
)

// encodePoolOp builds the front of an MPoolOp, version 4.
func encodePoolOp(fsid denc.UUID, pool int64, op uint32, snap uint64) []byte {
	e := denc.NewEncoder(make([]byte, 0, 64))
	denc.EncodePaxosHeader(e, 0)
	fsid.Encode(e)
	e.U32(uint32(pool))
	e.U32(op)
	e.U64(0) // auid, unused
	e.U64(snap)
	e.String("") // name
	e.U8(0)      // pad
	e.I16(0)     // crush_rule
	return e.Bytes()
}

// poolOpReply is MPoolOpReply.
type poolOpReply struct {
	code  int32
	epoch uint32
	data  []byte
}

func decodePoolOpReply(b []byte) (poolOpReply, error) {
	var r poolOpReply
	d := denc.NewDecoder(b)
	denc.DecodePaxosHeader(d)
	var fsid denc.UUID
	fsid.Decode(d)
	r.code = d.I32("MPoolOpReply replyCode")
	r.epoch = d.U32("MPoolOpReply epoch")
	if d.Bool("MPoolOpReply has_response_data") {
		r.data = d.Blob("MPoolOpReply response_data")
	}
	if err := d.Err(); err != nil {
		return r, fmt.Errorf("rados: MPoolOpReply: %w", err)
	}
	return r, nil
}

// poolOp runs one pool operation and waits until our OSD map shows its
// effect.
func (c *Conn) poolOp(ctx context.Context, pool int64, op uint32, snap uint64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, poolOpTimeout)
	defer cancel()
	m := &msgr.Message{Type: msgPoolOp, Version: 4, CompatVersion: 2, Front: encodePoolOp(c.mc.FSID(), pool, op, snap)}
	rep, err := c.mc.Request(ctx, m, msgPoolOpReply)
	if err != nil {
		return nil, fmt.Errorf("rados: pool operation %#x on pool %d: %w", op, pool, err)
	}
	r, err := decodePoolOpReply(rep.Front)
	if err != nil {
		return nil, err
	}
	if r.code < 0 {
		return nil, fmt.Errorf("rados: pool operation %#x on pool %d: %w", op, pool, syscall.Errno(-r.code))
	}
	if err := c.ob.WaitForMap(ctx, r.epoch); err != nil {
		return nil, fmt.Errorf("rados: %w", err)
	}
	return r.data, nil
}

// SelfManagedSnapCreate allocates a self-managed snapshot id in the
// context's pool (as RBD does for image snapshots). Writes that should
// preserve data for it carry it in their snapshot context
// (WithSnapContext).
func (io *IOContext) SelfManagedSnapCreate(ctx context.Context) (uint64, error) {
	data, err := io.conn.poolOp(ctx, io.pool, poolOpCreateUnmanagedSnap, 0)
	if err != nil {
		return 0, err
	}
	d := denc.NewDecoder(data)
	id := d.U64("snapid")
	if err := d.Err(); err != nil {
		return 0, fmt.Errorf("rados: new snapshot id: %w", err)
	}
	return id, nil
}

// SelfManagedSnapRemove releases a self-managed snapshot id: the OSDs
// trim the data kept for it.
func (io *IOContext) SelfManagedSnapRemove(ctx context.Context, snapID uint64) error {
	_, err := io.conn.poolOp(ctx, io.pool, poolOpDeleteUnmanagedSnap, snapID)
	return err
}

// SelfManagedSnapRollback restores an object to its state at a
// self-managed snapshot, under the context's snapshot context.
func (io *IOContext) SelfManagedSnapRollback(ctx context.Context, oid string, snapID uint64) error {
	_, err := io.do(ctx, oid, 0, osdc.Rollback(snapID))
	return err
}
