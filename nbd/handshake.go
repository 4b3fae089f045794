package nbd

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// handshake runs the fixed newstyle negotiation. It returns the export the
// client chose, or (nil, nil) when the client ended the session with
// NBD_OPT_ABORT.
func (ss *session) handshake() (*exportState, error) {
	c := ss.currentConn()
	if err := c.SetDeadline(time.Now().Add(ss.srv.handshakeTimeout)); err != nil {
		return nil, fmt.Errorf("nbd handshake: set deadline: %w", err)
	}
	var greeting [18]byte
	binary.BigEndian.PutUint64(greeting[0:], magicNBD)
	binary.BigEndian.PutUint64(greeting[8:], magicIHaveOpt)
	binary.BigEndian.PutUint16(greeting[16:], flagFixedNewstyle|flagNoZeroes)
	if _, err := ss.bw.Write(greeting[:]); err != nil {
		return nil, fmt.Errorf("nbd handshake: send greeting: %w", err)
	}
	if err := ss.bw.Flush(); err != nil {
		return nil, fmt.Errorf("nbd handshake: send greeting: %w", err)
	}
	var cf [4]byte
	if _, err := io.ReadFull(ss.br, cf[:]); err != nil {
		return nil, fmt.Errorf("nbd handshake: read client flags: %w", eofIsClean(err))
	}
	flags := binary.BigEndian.Uint32(cf[:])
	if flags&^clientFlagsKnown != 0 {
		return nil, handshakeViolation("unknown client flags %#x", flags)
	}
	ss.fixedNewstyle = flags&clientFlagFixedNewstyle != 0
	ss.noZeroes = flags&clientFlagNoZeroes != 0
	if ss.srv.requireTLS && !ss.fixedNewstyle {
		// TLS needs fixed newstyle; without it nothing can be served.
		return nil, handshakeViolation("client without fixed newstyle cannot start the TLS this server requires")
	}
	for {
		exp, done, err := ss.option()
		if err == nil && done && exp == nil {
			return nil, nil // NBD_OPT_ABORT, already answered
		}
		if err != nil || done {
			if ferr := ss.bw.Flush(); err == nil && ferr != nil {
				err = fmt.Errorf("nbd handshake: send reply: %w", ferr)
			}
			if err == nil && exp != nil {
				if derr := ss.currentConn().SetDeadline(time.Time{}); derr != nil {
					return nil, fmt.Errorf("nbd handshake: clear deadline: %w", derr)
				}
			}
			return exp, err
		}
		if err := ss.bw.Flush(); err != nil {
			return nil, fmt.Errorf("nbd handshake: send reply: %w", err)
		}
	}
}

// option reads and answers one option. done reports the end of the
// handshake: with an export to enter transmission, or without after ABORT.
func (ss *session) option() (exp *exportState, done bool, err error) {
	var h [16]byte
	if _, err := io.ReadFull(ss.br, h[:]); err != nil {
		return nil, false, fmt.Errorf("nbd handshake: read option: %w", eofIsClean(err))
	}
	if m := binary.BigEndian.Uint64(h[0:]); m != magicIHaveOpt {
		return nil, false, handshakeViolation("option magic %#x", m)
	}
	opt := binary.BigEndian.Uint32(h[8:])
	length := binary.BigEndian.Uint32(h[12:])

	if length > maxOptionLen {
		if opt == optExportName || length > maxOptionDiscard {
			return nil, false, handshakeViolation("option %d with %d bytes of data", opt, length)
		}
		if _, err := io.CopyN(io.Discard, ss.br, int64(length)); err != nil {
			return nil, false, fmt.Errorf("nbd handshake: skip option data: %w", err)
		}
		return nil, false, ss.optReplyMsg(opt, repErrTooBig, "option data too long")
	}
	// The buffer grows with the data that arrives, not with the length
	// the client announces: a 16-byte header must not cost 64 KiB.
	data, err := io.ReadAll(io.LimitReader(ss.br, int64(length)))
	if err == nil && len(data) < int(length) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, false, fmt.Errorf("nbd handshake: read option data: %w", err)
	}

	if ss.isShuttingDown() && opt != optAbort {
		if opt == optExportName {
			return nil, false, errors.New("nbd handshake: shutting down")
		}
		return nil, false, ss.optReplyMsg(opt, repErrShutdown, "server shutting down")
	}
	if ss.srv.requireTLS && !ss.tlsUp && opt != optStartTLS && opt != optAbort {
		if opt == optExportName {
			return nil, false, handshakeViolation("NBD_OPT_EXPORT_NAME before the TLS this server requires")
		}
		return nil, false, ss.optReplyMsg(opt, repErrTLSReqd, "TLS required")
	}

	switch opt {
	case optExportName:
		return ss.optExportName(data)
	case optAbort:
		// The client may already be gone; a failed ACK is no error.
		if ss.optReply(opt, repAck, nil) == nil {
			ss.bw.Flush()
		}
		return nil, true, nil
	case optList:
		return nil, false, ss.optList(data)
	case optStartTLS:
		return nil, false, ss.optStartTLS(data)
	case optInfo, optGo:
		return ss.optInfoGo(opt, data)
	case optStructuredReply:
		if len(data) != 0 {
			return nil, false, ss.optReplyMsg(opt, repErrInvalid, "NBD_OPT_STRUCTURED_REPLY takes no data")
		}
		ss.structured = true
		return nil, false, ss.optReply(opt, repAck, nil)
	case optListMetaContext, optSetMetaContext:
		return nil, false, ss.optMetaContext(opt, data)
	}
	return nil, false, ss.optReplyMsg(opt, repErrUnsup, fmt.Sprintf("option %d not supported", opt))
}

func eofIsClean(err error) error {
	if errors.Is(err, io.EOF) {
		return errCleanEnd
	}
	return err
}

// optReply writes one option reply.
func (ss *session) optReply(opt, typ uint32, data []byte) error {
	var h [optionReplyHeaderLen]byte
	binary.BigEndian.PutUint64(h[0:], magicOptReply)
	binary.BigEndian.PutUint32(h[8:], opt)
	binary.BigEndian.PutUint32(h[12:], typ)
	binary.BigEndian.PutUint32(h[16:], uint32(len(data)))
	if _, err := ss.bw.Write(h[:]); err != nil {
		return fmt.Errorf("nbd handshake: send reply: %w", err)
	}
	if _, err := ss.bw.Write(data); err != nil {
		return fmt.Errorf("nbd handshake: send reply: %w", err)
	}
	return nil
}

// optReplyMsg writes an error reply carrying a message for humans.
func (ss *session) optReplyMsg(opt, typ uint32, msg string) error {
	return ss.optReply(opt, typ, []byte(msg))
}

func (ss *session) optExportName(data []byte) (*exportState, bool, error) {
	if len(data) > maxStringLen {
		return nil, false, handshakeViolation("export name of %d bytes", len(data))
	}
	name := string(data)
	exp := ss.srv.lookup(name)
	if exp == nil {
		// NBD_OPT_EXPORT_NAME cannot fail softly: the session ends.
		return nil, false, fmt.Errorf("nbd handshake: NBD_OPT_EXPORT_NAME: no export %q", name)
	}
	if ss.metaExport != name {
		ss.metaContexts = nil
	}
	var r [8 + 2 + 124]byte
	binary.BigEndian.PutUint64(r[0:], uint64(exp.Backend.Size()))
	binary.BigEndian.PutUint16(r[8:], exp.transmissionFlags(ss.structured))
	n := len(r)
	if ss.noZeroes {
		n = 10
	}
	if _, err := ss.bw.Write(r[:n]); err != nil {
		return nil, false, fmt.Errorf("nbd handshake: send export info: %w", err)
	}
	return exp, true, nil
}

func (ss *session) optList(data []byte) error {
	if len(data) != 0 {
		return ss.optReplyMsg(optList, repErrInvalid, "NBD_OPT_LIST takes no data")
	}
	for _, e := range ss.srv.exportList() {
		b := make([]byte, 4, 4+len(e.Name)+len(e.Description))
		binary.BigEndian.PutUint32(b, uint32(len(e.Name)))
		b = append(b, e.Name...)
		b = append(b, e.Description...)
		if err := ss.optReply(optList, repServer, b); err != nil {
			return err
		}
	}
	return ss.optReply(optList, repAck, nil)
}

func (ss *session) optStartTLS(data []byte) error {
	switch {
	case len(data) != 0:
		return ss.optReplyMsg(optStartTLS, repErrInvalid, "NBD_OPT_STARTTLS takes no data")
	case ss.srv.tlsConfig == nil:
		return ss.optReplyMsg(optStartTLS, repErrPolicy, "TLS not configured")
	case ss.tlsUp:
		return ss.optReplyMsg(optStartTLS, repErrInvalid, "TLS already started")
	case !ss.fixedNewstyle:
		return ss.optReplyMsg(optStartTLS, repErrInvalid, "TLS needs fixed newstyle negotiation")
	}
	if err := ss.optReply(optStartTLS, repAck, nil); err != nil {
		return err
	}
	if err := ss.bw.Flush(); err != nil {
		return fmt.Errorf("nbd handshake: send reply: %w", err)
	}
	if ss.br.Buffered() != 0 {
		return handshakeViolation("data sent after NBD_OPT_STARTTLS before its reply")
	}
	tc := tls.Server(ss.currentConn(), ss.srv.tlsConfig)
	if err := tc.HandshakeContext(ss.ctx); err != nil {
		return fmt.Errorf("nbd handshake: TLS: %w", err)
	}
	ss.setConn(tc)
	ss.tlsUp = true
	// Nothing negotiated before TLS survives it.
	ss.structured = false
	ss.metaExport, ss.metaContexts = "", nil
	return nil
}

func (ss *session) optInfoGo(opt uint32, data []byte) (*exportState, bool, error) {
	req, err := parseInfoRequest(data)
	if err != nil {
		return nil, false, ss.optReplyMsg(opt, repErrInvalid, err.Error())
	}
	exp := ss.srv.lookup(req.name)
	if exp == nil {
		return nil, false, ss.optReplyMsg(opt, repErrUnknown, fmt.Sprintf("no export %q", req.name))
	}
	size := exp.Backend.Size()
	flags := exp.transmissionFlags(ss.structured)

	var b [14]byte
	binary.BigEndian.PutUint16(b[0:], infoExport)
	binary.BigEndian.PutUint64(b[2:], uint64(size))
	binary.BigEndian.PutUint16(b[10:], flags)
	if err := ss.optReply(opt, repInfo, b[:12]); err != nil {
		return nil, false, err
	}
	// Block sizes are always sent: harmless to clients that did not ask.
	binary.BigEndian.PutUint16(b[0:], infoBlockSize)
	binary.BigEndian.PutUint32(b[2:], exp.minBlock)
	binary.BigEndian.PutUint32(b[6:], exp.prefBlock)
	binary.BigEndian.PutUint32(b[10:], exp.maxLoad)
	if err := ss.optReply(opt, repInfo, b[:14]); err != nil {
		return nil, false, err
	}
	if req.wantName {
		if err := ss.optReply(opt, repInfo, append([]byte{0, infoName}, exp.Name...)); err != nil {
			return nil, false, err
		}
	}
	if req.wantDescription && exp.Description != "" {
		if err := ss.optReply(opt, repInfo, append([]byte{0, infoDescription}, exp.Description...)); err != nil {
			return nil, false, err
		}
	}
	if err := ss.optReply(opt, repAck, nil); err != nil {
		return nil, false, err
	}
	if opt == optInfo {
		return nil, false, nil
	}
	if ss.metaExport != req.name {
		ss.metaContexts = nil
	}
	return exp, true, nil
}

func (ss *session) optMetaContext(opt uint32, data []byte) error {
	if opt == optSetMetaContext {
		// A SET replaces the selection even when it fails.
		ss.metaExport, ss.metaContexts = "", nil
		if !ss.structured {
			return ss.optReplyMsg(opt, repErrInvalid, "structured replies not negotiated")
		}
	}
	req, err := parseMetaContextRequest(data)
	if err != nil {
		return ss.optReplyMsg(opt, repErrInvalid, err.Error())
	}
	exp := ss.srv.lookup(req.export)
	if exp == nil {
		return ss.optReplyMsg(opt, repErrUnknown, fmt.Sprintf("no export %q", req.export))
	}
	picked := matchContexts(exportContexts(ss.ctx, exp, ss.srv.log), req.queries, opt == optListMetaContext)
	for _, c := range picked {
		id := uint32(0) // LIST replies carry a reserved zero id
		if opt == optSetMetaContext {
			id = c.id
		}
		b := make([]byte, 4, 4+len(c.name))
		binary.BigEndian.PutUint32(b, id)
		b = append(b, c.name...)
		if err := ss.optReply(opt, repMetaContext, b); err != nil {
			return err
		}
	}
	if opt == optSetMetaContext {
		ss.metaExport, ss.metaContexts = req.export, picked
	}
	return ss.optReply(opt, repAck, nil)
}
