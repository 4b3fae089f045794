package monc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/purerbd/purerbd/rados/msgr"
)

// request is a message waiting for its answer (a command, a version
// query, or any request sent through Request). It stays registered
// until answered or abandoned, and is resent on every new session.
type request struct {
	msg       msgr.Message
	replyType uint16             // the message type of the answer
	reply     chan *msgr.Message // the answer, with buffer 1
}

// forget removes a request.
func (c *Client) forget(tid uint64) {
	c.mu.Lock()
	delete(c.requests, tid)
	c.mu.Unlock()
}

// roundTrip sends m as a request and waits for its answer, a message of
// type replyType. build returns the front for the tid the request gets.
func (c *Client) roundTrip(ctx context.Context, m msgr.Message, replyType uint16, build func(tid uint64) []byte) (*msgr.Message, error) {
	// A context that has already ended sends nothing: otherwise the
	// monitor could carry out a command whose caller was told it failed.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.lastTid++
	m.Tid = c.lastTid
	m.Front = build(m.Tid)
	r := &request{msg: m, replyType: replyType, reply: make(chan *msgr.Message, 1)}
	c.requests[m.Tid] = r
	conn := c.conn
	c.mu.Unlock()
	defer c.forget(m.Tid)
	if conn != nil {
		c.send(ctx, conn, m)
	}
	select {
	case rep := <-r.reply:
		return rep, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.ctx.Done():
		return nil, ErrClosed
	}
}

// answer hands a reply to the request with tid, if it still waits for
// a message of m's type.
func (c *Client) answer(tid uint64, m *msgr.Message) bool {
	c.mu.Lock()
	r := c.requests[tid]
	if r == nil || r.replyType != m.Type {
		c.mu.Unlock()
		return false
	}
	delete(c.requests, tid)
	c.mu.Unlock()
	r.reply <- m
	return true
}

// Command runs a monitor command, as `ceph` does: cmd holds the command
// as JSON (usually one string such as {"prefix":"osd dump","format":"json"}),
// inbuf the input some commands read. It returns the output buffer and
// the status string. A negative return code from the monitor gives a
// *CommandError (with outbuf and outs still returned); a lost monitor
// session makes the client resend the command to the next monitor.
func (c *Client) Command(ctx context.Context, cmd []string, inbuf []byte) (outbuf []byte, outs string, err error) {
	if len(cmd) == 0 {
		return nil, "", errors.New("monc: empty mon command")
	}
	prefix := commandPrefix(cmd)
	fsid := c.FSID()
	m := msgr.Message{Type: msgMonCommand, Version: 1, Data: inbuf}
	rep, err := c.roundTrip(ctx, m, msgMonCommandAck, func(uint64) []byte { return encodeCommand(fsid, cmd) })
	if err != nil {
		return nil, "", fmt.Errorf("monc: mon command %q: %w", prefix, err)
	}
	ack, err := decodeCommandAck(rep.Front)
	if err != nil {
		return nil, "", err
	}
	if ack.r < 0 {
		return rep.Data, ack.rs, &CommandError{Prefix: prefix, Errno: syscall.Errno(-ack.r), Status: ack.rs}
	}
	return rep.Data, ack.rs, nil
}

// CommandJSON is Command with the command given as a value to marshal
// to JSON, e.g. map[string]any{"prefix": "osd pool ls", "format": "json"}.
func (c *Client) CommandJSON(ctx context.Context, cmd any, inbuf []byte) (outbuf []byte, outs string, err error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, "", fmt.Errorf("monc: encoding mon command: %w", err)
	}
	return c.Command(ctx, []string{string(b)}, inbuf)
}

// commandPrefix returns the "prefix" of a JSON command, for errors.
func commandPrefix(cmd []string) string {
	var v struct {
		Prefix string `json:"prefix"`
	}
	if json.Unmarshal([]byte(cmd[0]), &v) == nil && v.Prefix != "" {
		return v.Prefix
	}
	return ""
}

// handleCommandAck completes the command the ack answers.
func (c *Client) handleCommandAck(m *msgr.Message) {
	if !c.answer(m.Tid, m) {
		c.log.Debug("monc: command ack for no waiting command", "tid", m.Tid)
	}
}

// GetVersion asks the monitors for the newest and oldest versions they
// hold of a map: "osdmap", "monmap", "mdsmap", "fsmap", "mgrmap".
func (c *Client) GetVersion(ctx context.Context, what string) (newest, oldest uint64, err error) {
	m := msgr.Message{Type: msgMonGetVersion, Version: 1}
	rep, err := c.roundTrip(ctx, m, msgMonGetVersionReply, func(tid uint64) []byte { return encodeGetVersion(tid, what) })
	if err != nil {
		return 0, 0, fmt.Errorf("monc: version of %s: %w", what, err)
	}
	r, err := decodeVersionReply(rep.Front, rep.Version)
	if err != nil {
		return 0, 0, err
	}
	return r.newest, r.oldest, nil
}

// handleVersionReply completes the version query the reply answers (by
// its handle, which is the query's tid).
func (c *Client) handleVersionReply(m *msgr.Message) {
	r, err := decodeVersionReply(m.Front, m.Version)
	if err != nil {
		c.log.Warn("monc: bad version reply", "err", err)
		return
	}
	if !c.answer(r.handle, m) {
		c.log.Debug("monc: version reply for no waiting query", "handle", r.handle)
	}
}
