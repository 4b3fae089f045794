package msgr

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
)

// TestServerIdentMustNameTheTarget checks SERVER_IDENT as Ceph does: the
// peer's addresses must include the one dialed, nonce and type included,
// so a daemon restarted at the same IP and port (a new nonce) is not
// taken for the one the client meant.
func TestServerIdentMustNameTheTarget(t *testing.T) {
	ap := netip.MustParseAddrPort("10.0.0.5:6802")
	target := denc.NewEntityAddr(denc.AddrMsgr2, ap, 4242)
	v1 := denc.NewEntityAddr(denc.AddrLegacy, netip.MustParseAddrPort("10.0.0.5:6803"), 4242)
	for _, tc := range []struct {
		name  string
		addrs denc.EntityAddrVec
		ok    bool
	}{
		{"the target", denc.EntityAddrVec{target}, true},
		{"the target and its v1 address", denc.EntityAddrVec{target, v1}, true},
		{"another nonce", denc.EntityAddrVec{denc.NewEntityAddr(denc.AddrMsgr2, ap, 4243)}, false},
		{"no nonce", denc.EntityAddrVec{denc.NewEntityAddr(denc.AddrMsgr2, ap, 0)}, false},
		{"another port", denc.EntityAddrVec{denc.NewEntityAddr(denc.AddrMsgr2, netip.MustParseAddrPort("10.0.0.5:6804"), 4242)}, false},
		{"the same as a v1 address", denc.EntityAddrVec{denc.NewEntityAddr(denc.AddrLegacy, ap, 4242)}, false},
		{"none", nil, false},
	} {
		c := &Conn{target: target}
		err := c.acceptServerIdent(serverIdent{addrs: tc.addrs, gid: 3, features: DefaultFeatures})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case !tc.ok && !errors.Is(err, ErrWrongPeer):
			t.Errorf("%s: %v, want ErrWrongPeer", tc.name, err)
		case tc.ok && (c.peerGID != 3 || len(c.peerAddrs) != len(tc.addrs)):
			t.Errorf("%s: identity not recorded: gid %d, addrs %s", tc.name, c.peerGID, c.peerAddrs)
		}
	}
}
