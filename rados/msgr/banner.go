package msgr

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The banner opens a msgr2 connection in both directions: the magic
// "ceph v2\n", a le16 payload length and the payload, whose first 16
// bytes are the msgr2 features supported and required.
const (
	bannerMagic     = "ceph v2\n"
	bannerMagicV1   = "ceph v027"
	bannerPrefixLen = len(bannerMagic) + 2
	bannerMinLen    = 16
)

// encodeBanner returns our banner.
func encodeBanner(supported, required uint64) []byte {
	b := make([]byte, 0, bannerPrefixLen+bannerMinLen)
	b = append(b, bannerMagic...)
	b = binary.LittleEndian.AppendUint16(b, bannerMinLen)
	b = binary.LittleEndian.AppendUint64(b, supported)
	return binary.LittleEndian.AppendUint64(b, required)
}

// banner is a peer's banner.
type banner struct {
	supported, required uint64
	raw                 []byte // as received, for the auth signature
}

// readBanner reads and checks the peer's banner.
func readBanner(r io.Reader) (banner, error) {
	var b banner
	pre := make([]byte, bannerPrefixLen)
	if _, err := io.ReadFull(r, pre); err != nil {
		return b, err
	}
	if string(pre[:len(bannerMagic)]) != bannerMagic {
		if string(pre[:len(bannerMagicV1)]) == bannerMagicV1 {
			return b, fmt.Errorf("%w: peer speaks msgr v1 only", ErrProtocol)
		}
		return b, fmt.Errorf("%w: bad banner %q", ErrProtocol, pre)
	}
	n := binary.LittleEndian.Uint16(pre[len(bannerMagic):])
	if n < bannerMinLen {
		return b, fmt.Errorf("%w: banner payload of %d bytes, want at least %d", ErrProtocol, n, bannerMinLen)
	}
	// The payload is read as it arrives: a peer announcing 64 KiB and
	// sending nothing costs nothing.
	payload, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err == nil && len(payload) < int(n) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return b, err
	}
	b.supported = binary.LittleEndian.Uint64(payload)
	b.required = binary.LittleEndian.Uint64(payload[8:])
	b.raw = append(pre, payload...)
	return b, nil
}

// check verifies that both sides can speak msgr2.1.
func (b banner) check() error {
	if missing := msgr2Required &^ b.supported; missing != 0 {
		return fmt.Errorf("%w: peer lacks msgr2 features %#x (revision 1 is required)", ErrMissingFeatures, missing)
	}
	if missing := b.required &^ msgr2Supported; missing != 0 {
		return fmt.Errorf("%w: peer requires msgr2 features %#x this client lacks", ErrMissingFeatures, missing)
	}
	return nil
}
