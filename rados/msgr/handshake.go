package msgr

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"syscall"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
)

// maxAuthRounds bounds AUTH_REPLY_MORE round trips (cephx needs one).
const maxAuthRounds = 8

// maxIdentRetries bounds RETRY/RESET answers to CLIENT_IDENT.
const maxIdentRetries = 4

// handshake runs the client side of a msgr2.1 handshake on c, whose
// socket is connected and whose deadline the caller has set.
type handshake struct {
	c *Conn
	// Until AUTH_DONE every byte exchanged is kept: each side then signs
	// what it received and checks the other's signature of what it sent.
	rxLog, txLog []byte
	logging      bool
}

// recordingReader appends what is read through it to the rx log while
// logging is on. It sits above the buffered reader, so only consumed
// bytes are recorded.
type recordingReader struct{ h *handshake }

func (r recordingReader) Read(p []byte) (int, error) {
	n, err := r.h.c.br.Read(p)
	if r.h.logging {
		r.h.rxLog = append(r.h.rxLog, p[:n]...)
	}
	return n, err
}

func (h *handshake) write(b []byte) error {
	if h.logging {
		h.txLog = append(h.txLog, b...)
	}
	if _, err := h.c.nc.Write(b); err != nil {
		return err
	}
	return nil
}

func (h *handshake) writeFrame(tag uint8, control []byte) error {
	segs := [maxSegments][]byte{control}
	return h.write(flatten(h.c.fw.build(tag, &segs)))
}

func (h *handshake) readFrame() (frame, error) {
	return h.c.fr.read(recordingReader{h})
}

// run performs banner, hello, auth, signatures and ident.
func (h *handshake) run() error {
	c := h.c
	h.logging = true
	if err := h.write(encodeBanner(msgr2Supported, msgr2Required)); err != nil {
		return fmt.Errorf("sending banner: %w", err)
	}
	b, err := readBanner(recordingReader{h})
	if err != nil {
		return fmt.Errorf("reading banner: %w", err)
	}
	if err := b.check(); err != nil {
		return err
	}
	if err := h.hello(); err != nil {
		return err
	}
	sess, err := h.auth()
	if err != nil {
		return err
	}
	if err := h.signatures(sess); err != nil {
		return err
	}
	c.globalID = sess.GlobalID
	return h.ident()
}

// hello exchanges HELLO frames and learns our address as the peer sees it.
func (h *handshake) hello() error {
	c := h.c
	if err := h.writeFrame(tagHello, helloFrame{entityType: denc.EntityTypeClient, peerAddr: c.target}.encode()); err != nil {
		return fmt.Errorf("sending HELLO: %w", err)
	}
	f, err := h.readFrame()
	if err != nil {
		return fmt.Errorf("reading HELLO: %w", err)
	}
	if f.tag != tagHello {
		return fmt.Errorf("%w: got frame tag %d, want HELLO", ErrProtocol, f.tag)
	}
	hf, err := decodeHello(f.segs[0])
	if err != nil {
		return err
	}
	if hf.entityType != c.cfg.PeerType {
		return fmt.Errorf("%w: peer at %s is a %s, want %s", ErrProtocol, c.target, hf.entityType, c.cfg.PeerType)
	}
	// Our address: the IP the peer sees, no port (we do not listen),
	// this client's nonce.
	ip := hf.peerAddr.IP
	if !ip.IsValid() {
		ip = netip.IPv4Unspecified()
	}
	c.myAddr = denc.NewEntityAddr(denc.AddrAny, netip.AddrPortFrom(ip, 0), c.cfg.Nonce)
	return nil
}

// auth runs the AUTH_REQUEST exchange until AUTH_DONE.
func (h *handshake) auth() (auth.Session, error) {
	c := h.c
	handler, err := c.cfg.Auth.NewHandler(c.cfg.PeerType)
	if err != nil {
		return auth.Session{}, err
	}
	payload, err := handler.Request()
	if err != nil {
		return auth.Session{}, err
	}
	modes := c.cfg.Mode.modes(c.cfg.PeerType)
	if handler.Method() == auth.MethodNone {
		// Without a session key there is nothing to derive secure mode from.
		modes = slices.DeleteFunc(modes, func(m ConnMode) bool { return m == ConnModeSecure })
		if len(modes) == 0 {
			return auth.Session{}, fmt.Errorf("%w: auth none cannot use secure mode", ErrModeRefused)
		}
	}
	if err := h.writeFrame(tagAuthRequest, encodeAuthRequest(handler.Method(), modes, payload)); err != nil {
		return auth.Session{}, fmt.Errorf("sending AUTH_REQUEST: %w", err)
	}
	for round := 0; ; round++ {
		f, err := h.readFrame()
		if err != nil {
			return auth.Session{}, fmt.Errorf("reading auth reply: %w", err)
		}
		switch f.tag {
		case tagAuthReplyMore:
			if round >= maxAuthRounds {
				return auth.Session{}, fmt.Errorf("%w: more than %d auth rounds", ErrProtocol, maxAuthRounds)
			}
			reply, err := decodeBlobFrame("AUTH_REPLY_MORE", f.segs[0])
			if err != nil {
				return auth.Session{}, err
			}
			more, err := handler.More(reply)
			if err != nil {
				return auth.Session{}, err
			}
			if err := h.writeFrame(tagAuthRequestMore, encodeBlobFrame(more)); err != nil {
				return auth.Session{}, fmt.Errorf("sending AUTH_REQUEST_MORE: %w", err)
			}
		case tagAuthDone:
			done, err := decodeAuthDone(f.segs[0])
			if err != nil {
				return auth.Session{}, err
			}
			if !slices.Contains(modes, done.mode) {
				return auth.Session{}, fmt.Errorf("%w: peer chose connection mode %s, we offered %v", ErrProtocol, done.mode, modes)
			}
			sess, err := handler.Done(done.globalID, done.payload)
			if err != nil {
				return auth.Session{}, err
			}
			c.mode = done.mode
			return sess, nil
		case tagAuthBadMethod:
			bm, err := decodeAuthBadMethod(f.segs[0])
			if err != nil {
				return auth.Session{}, err
			}
			if bm.result == -95 && slices.Contains(bm.allowedMethods, handler.Method()) {
				ok := false
				for _, m := range modes {
					ok = ok || slices.Contains(bm.allowedModes, m)
				}
				if !ok {
					return auth.Session{}, fmt.Errorf("%w: peer allows connection modes %v, we offered %v",
						ErrModeRefused, bm.allowedModes, modes)
				}
			}
			return auth.Session{}, handler.BadMethod(bm.result, bm.allowedMethods)
		default:
			return auth.Session{}, fmt.Errorf("%w: got frame tag %d during auth", ErrProtocol, f.tag)
		}
	}
}

// signatures switches to the negotiated mode and exchanges
// AUTH_SIGNATURE: we send the HMAC-SHA256 (keyed with the session key) of
// everything we received, and check the peer's HMAC of everything we
// sent. With auth none both are all zeros.
func (h *handshake) signatures(sess auth.Session) error {
	c := h.c
	h.logging = false
	if c.mode == ConnModeSecure {
		rx, tx, err := newGCMPair(sess.ConnectionSecret)
		if err != nil {
			return err
		}
		c.fr.rx, c.fw.tx = rx, tx
	}
	sign := func(data []byte) []byte {
		if len(sess.SessionKey) == 0 {
			return make([]byte, sha256.Size)
		}
		m := hmac.New(sha256.New, sess.SessionKey)
		m.Write(data)
		return m.Sum(nil)
	}
	if err := h.writeFrame(tagAuthSignature, sign(h.rxLog)); err != nil {
		return fmt.Errorf("sending AUTH_SIGNATURE: %w", err)
	}
	f, err := h.readFrame()
	if err != nil {
		return fmt.Errorf("reading AUTH_SIGNATURE: %w", err)
	}
	if f.tag != tagAuthSignature {
		return fmt.Errorf("%w: got frame tag %d, want AUTH_SIGNATURE", ErrProtocol, f.tag)
	}
	if len(f.segs[0]) < sha256.Size || !hmac.Equal(f.segs[0][:sha256.Size], sign(h.txLog)) {
		return fmt.Errorf("%w: peer's auth signature does not match what we sent", ErrProtocol)
	}
	h.rxLog, h.txLog = nil, nil
	return nil
}

// ident exchanges CLIENT_IDENT and SERVER_IDENT.
func (h *handshake) ident() error {
	c := h.c
	var cookie [8]byte
	if _, err := rand.Read(cookie[:]); err != nil {
		return fmt.Errorf("msgr: random cookie: %w", err)
	}
	ci := clientIdent{
		addrs:     denc.EntityAddrVec{c.myAddr},
		target:    c.target,
		gid:       int64(c.globalID),
		globalSeq: c.cfg.GlobalSeq,
		features:  c.cfg.Features,
		required:  c.cfg.RequiredFeatures,
		flags:     connectLossy,
		cookie:    binary.LittleEndian.Uint64(cookie[:]) | 1,
	}
	for try := 0; ; try++ {
		if try > maxIdentRetries {
			return fmt.Errorf("%w: peer kept asking to retry CLIENT_IDENT", ErrProtocol)
		}
		if err := h.writeFrame(tagClientIdent, ci.encode()); err != nil {
			return fmt.Errorf("sending CLIENT_IDENT: %w", err)
		}
		f, err := h.readFrame()
		if err != nil {
			return fmt.Errorf("reading SERVER_IDENT: %w", err)
		}
		switch f.tag {
		case tagServerIdent:
			si, err := decodeServerIdent(f.segs[0])
			if err != nil {
				return err
			}
			return c.acceptServerIdent(si)
		case tagIdentMissingFeature:
			missing, err := decodeU64("IDENT_MISSING_FEATURES", f.segs[0])
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: peer requires features %#x we do not advertise", ErrMissingFeatures, missing)
		case tagWait:
			return ErrWait
		case tagSessionRetryGlobal:
			gs, err := decodeU64("RETRY_GLOBAL", f.segs[0])
			if err != nil {
				return err
			}
			ci.globalSeq = max(ci.globalSeq, gs) + 1
		case tagSessionRetry, tagSessionReset:
			// A fresh lossy session has nothing to resume: identify again.
		default:
			return fmt.Errorf("%w: got frame tag %d, want SERVER_IDENT", ErrProtocol, f.tag)
		}
	}
}

// acceptServerIdent checks the peer's identity and records it. As in
// Ceph's ProtocolV2 (entity_addrvec_t::contains, a memcmp of the whole
// address) and the kernel client (memcmp with the dialed address), the
// peer's addresses must include the one dialed: type, IP, port and
// nonce. The nonce tells a daemon restarted at the same IP and port
// (a new nonce, which the next map will show) from the instance the
// dialer meant. (The IPv6 flow info and scope id, which Ceph compares
// too, are left out: they are not part of a daemon's identity.)
func (c *Conn) acceptServerIdent(si serverIdent) error {
	t := c.target
	if !slices.ContainsFunc(si.addrs, func(a denc.EntityAddr) bool {
		return a.Type == t.Type && a.IP == t.IP && a.Port == t.Port && a.Nonce == t.Nonce
	}) {
		return fmt.Errorf("%w: peer identifies as %s, which does not include %s", ErrWrongPeer, si.addrs, t)
	}
	if missing := c.cfg.RequiredFeatures &^ si.features; missing != 0 {
		return fmt.Errorf("%w: peer lacks required features %#x", ErrMissingFeatures, missing)
	}
	if missing := si.required &^ c.cfg.Features; missing != 0 {
		return fmt.Errorf("%w: peer requires features %#x we do not advertise", ErrMissingFeatures, missing)
	}
	c.peerAddrs = si.addrs
	c.peerGID = si.gid
	c.peerFeatures = si.features
	c.features = si.features & c.cfg.Features
	return nil
}

// peerGone reports whether err means the peer closed or reset the
// connection.
func peerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}
