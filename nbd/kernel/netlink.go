package kernel

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/purerbd/purerbd/nbd/kernel/internal/genl"
)

// The nbd generic netlink family (include/uapi/linux/nbd-netlink.h).
const (
	familyName    = "nbd"
	familyVersion = 1

	cmdConnect     = 1
	cmdDisconnect  = 2
	cmdReconfigure = 3
	cmdLinkDead    = 4 // a notification: the kernel declared a connection dead
	cmdStatus      = 5

	// mcastGroup is the family's multicast group, which carries
	// cmdLinkDead.
	mcastGroup = "nbd_mc_group"

	attrIndex             = 1
	attrSizeBytes         = 2
	attrBlockSizeBytes    = 3
	attrTimeout           = 4
	attrServerFlags       = 5
	attrClientFlags       = 6
	attrSockets           = 7
	attrDeadConnTimeout   = 8
	attrDeviceList        = 9
	attrBackendIdentifier = 10 // Linux 5.14+

	sockItem = 1
	sockFD   = 1

	deviceItem      = 1
	deviceIndex     = 1
	deviceConnected = 2
)

// ServerFlags are the NBD transmission flags the kernel is told the
// server has (NBD_ATTR_SERVER_FLAGS); they decide which commands it sends.
type ServerFlags uint64

// Transmission flags the Linux client honours.
const (
	FlagHasFlags        ServerFlags = 1 << 0
	FlagReadOnly        ServerFlags = 1 << 1
	FlagSendFlush       ServerFlags = 1 << 2
	FlagSendFUA         ServerFlags = 1 << 3
	FlagRotational      ServerFlags = 1 << 4
	FlagSendTrim        ServerFlags = 1 << 5
	FlagSendWriteZeroes ServerFlags = 1 << 6
	FlagCanMultiConn    ServerFlags = 1 << 8
)

// ClientFlags tune the kernel side of a device (NBD_ATTR_CLIENT_FLAGS).
type ClientFlags uint64

const (
	// DestroyOnDisconnect removes /dev/nbdN when it is disconnected.
	DestroyOnDisconnect ClientFlags = 1 << 0
	// DisconnectOnClose disconnects when the last opener closes the device.
	DisconnectOnClose ClientFlags = 1 << 1
)

// AnyIndex lets the kernel pick the device: a free one, or a new one.
const AnyIndex = -1

// ConnectRequest is an NBD_CMD_CONNECT.
type ConnectRequest struct {
	// Index is the device to configure, or AnyIndex.
	Index int
	// Size is the device size in bytes; BlockSize the logical block size
	// (a power of two from 512 to the page size; 0 is the kernel's 1024).
	Size      uint64
	BlockSize uint64
	// Timeout is the per-request timeout, DeadConnTimeout how long I/O
	// waits for a reconnect when every connection is dead. Both are sent
	// in whole seconds, rounded up; zero leaves the kernel's default.
	Timeout         time.Duration
	DeadConnTimeout time.Duration
	ServerFlags     ServerFlags
	ClientFlags     ClientFlags
	// Sockets are descriptors, open in this process, of sockets already
	// in the NBD transmission phase.
	Sockets []int
	// BackendIdentifier is the cookie that names the device for a later
	// RECONFIGURE; empty for none.
	BackendIdentifier string
}

// ReconfigureRequest is an NBD_CMD_RECONFIGURE: zero fields leave the
// setting as it is.
type ReconfigureRequest struct {
	Index     int
	Size      uint64
	BlockSize uint64
	Timeout   time.Duration
	// NoTimeout sends a request timeout of 0 (none), which Timeout 0
	// leaves as it was.
	NoTimeout       bool
	DeadConnTimeout time.Duration
	// ClientFlags, when not nil, replace the client flags.
	ClientFlags *ClientFlags
	// Sockets replace dead connections, one each; the kernel ignores
	// sockets beyond the number of dead connections.
	Sockets []int
	// BackendIdentifier must repeat the device's cookie (5.14+).
	BackendIdentifier string
}

// DeviceStatus is one entry of an NBD_CMD_STATUS reply. Connected means
// the device has a configuration: it stays true while the kernel waits
// for a dead server to come back.
type DeviceStatus struct {
	Index     int
	Connected bool
}

// seconds converts a timeout to the kernel's whole seconds, rounding up.
func seconds(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d + time.Second - 1) / time.Second)
}

func checkIndex(i int, anyOK bool) error {
	if i == AnyIndex && anyOK {
		return nil
	}
	if i < 0 || i > math.MaxInt32 {
		return fmt.Errorf("nbd device index %d out of range", i)
	}
	return nil
}

func encodeSockets(e *genl.Encoder, fds []int) error {
	for _, fd := range fds {
		if fd < 0 || fd > math.MaxInt32 {
			return fmt.Errorf("socket descriptor %d out of range", fd)
		}
	}
	e.Nested(attrSockets, func(e *genl.Encoder) {
		for _, fd := range fds {
			e.Nested(sockItem, func(e *genl.Encoder) { e.Uint32(sockFD, uint32(fd)) })
		}
	})
	return nil
}

// encodeConnect builds the attributes of a CONNECT. withBackend tells
// whether the kernel knows NBD_ATTR_BACKEND_IDENTIFIER.
func encodeConnect(r ConnectRequest, withBackend bool) ([]byte, error) {
	if err := checkIndex(r.Index, true); err != nil {
		return nil, err
	}
	if r.Size == 0 {
		return nil, errors.New("connect: size is zero")
	}
	if len(r.Sockets) == 0 {
		return nil, errors.New("connect: no sockets")
	}
	var e genl.Encoder
	if r.Index != AnyIndex {
		e.Uint32(attrIndex, uint32(r.Index))
	}
	e.Uint64(attrSizeBytes, r.Size)
	if r.BlockSize != 0 {
		e.Uint64(attrBlockSizeBytes, r.BlockSize)
	}
	if s := seconds(r.Timeout); s != 0 {
		e.Uint64(attrTimeout, s)
	}
	if s := seconds(r.DeadConnTimeout); s != 0 {
		e.Uint64(attrDeadConnTimeout, s)
	}
	e.Uint64(attrServerFlags, uint64(r.ServerFlags))
	if r.ClientFlags != 0 {
		e.Uint64(attrClientFlags, uint64(r.ClientFlags))
	}
	if err := encodeSockets(&e, r.Sockets); err != nil {
		return nil, err
	}
	if r.BackendIdentifier != "" && withBackend {
		e.String(attrBackendIdentifier, r.BackendIdentifier)
	}
	return e.Bytes()
}

// encodeReconfigure builds the attributes of a RECONFIGURE.
func encodeReconfigure(r ReconfigureRequest, withBackend bool) ([]byte, error) {
	if err := checkIndex(r.Index, false); err != nil {
		return nil, err
	}
	var e genl.Encoder
	e.Uint32(attrIndex, uint32(r.Index))
	if r.Size != 0 {
		e.Uint64(attrSizeBytes, r.Size)
	}
	if r.BlockSize != 0 {
		e.Uint64(attrBlockSizeBytes, r.BlockSize)
	}
	if s := seconds(r.Timeout); s != 0 || r.NoTimeout {
		e.Uint64(attrTimeout, s)
	}
	if s := seconds(r.DeadConnTimeout); s != 0 {
		e.Uint64(attrDeadConnTimeout, s)
	}
	if r.ClientFlags != nil {
		e.Uint64(attrClientFlags, uint64(*r.ClientFlags))
	}
	if len(r.Sockets) > 0 {
		if err := encodeSockets(&e, r.Sockets); err != nil {
			return nil, err
		}
	}
	if r.BackendIdentifier != "" && withBackend {
		e.String(attrBackendIdentifier, r.BackendIdentifier)
	}
	return e.Bytes()
}

func encodeIndex(index int) ([]byte, error) {
	var e genl.Encoder
	if index != AnyIndex {
		if err := checkIndex(index, false); err != nil {
			return nil, err
		}
		e.Uint32(attrIndex, uint32(index))
	}
	return e.Bytes()
}

// parseConnectReply finds the device index in a CONNECT's reply.
func parseConnectReply(msgs []genl.Message) (int, error) {
	l, err := parseIndexes(msgs, cmdConnect)
	if err != nil {
		return 0, fmt.Errorf("connect reply: %w", err)
	}
	if len(l) == 0 {
		return 0, errors.New("connect reply carries no device index")
	}
	return l[0], nil
}

// parseLinkDead returns the devices that LINK_DEAD notifications among
// msgs name.
func parseLinkDead(msgs []genl.Message) ([]int, error) {
	l, err := parseIndexes(msgs, cmdLinkDead)
	if err != nil {
		return nil, fmt.Errorf("link dead notification: %w", err)
	}
	return l, nil
}

// parseIndexes returns the device index of each message of command cmd
// among msgs (messages without one are skipped).
func parseIndexes(msgs []genl.Message, cmd uint8) ([]int, error) {
	var l []int
	for _, m := range msgs {
		g, err := m.Genl()
		if err != nil {
			return nil, err
		}
		if g.Cmd != cmd {
			continue
		}
		attrs, err := genl.ParseAttrs(g.Attrs)
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			if a.Type != attrIndex {
				continue
			}
			v, err := a.Uint32()
			if err != nil {
				return nil, err
			}
			if v > math.MaxInt32 {
				return nil, fmt.Errorf("index %d out of range", v)
			}
			l = append(l, int(v))
			break
		}
	}
	return l, nil
}

// parseStatusReply decodes the device list of a STATUS reply.
func parseStatusReply(msgs []genl.Message) ([]DeviceStatus, error) {
	var list []DeviceStatus
	seen := false
	for _, m := range msgs {
		g, err := m.Genl()
		if err != nil {
			return nil, err
		}
		if g.Cmd != cmdStatus {
			continue
		}
		seen = true
		attrs, err := genl.ParseAttrs(g.Attrs)
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			if a.Type != attrDeviceList {
				continue
			}
			items, err := a.Attrs()
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				if it.Type != deviceItem {
					continue
				}
				d, err := parseDeviceItem(it)
				if err != nil {
					return nil, err
				}
				list = append(list, d)
			}
		}
	}
	if !seen {
		return nil, errors.New("no STATUS reply")
	}
	return list, nil
}

func parseDeviceItem(it genl.Attr) (DeviceStatus, error) {
	fields, err := it.Attrs()
	if err != nil {
		return DeviceStatus{}, err
	}
	d := DeviceStatus{Index: -1}
	for _, f := range fields {
		switch f.Type {
		case deviceIndex:
			v, err := f.Uint32()
			if err != nil {
				return DeviceStatus{}, err
			}
			if v > math.MaxInt32 {
				return DeviceStatus{}, fmt.Errorf("status: device index %d out of range", v)
			}
			d.Index = int(v)
		case deviceConnected:
			v, err := f.Uint8()
			if err != nil {
				return DeviceStatus{}, err
			}
			d.Connected = v != 0
		}
	}
	if d.Index < 0 {
		return DeviceStatus{}, errors.New("status: device item without an index")
	}
	return d, nil
}
