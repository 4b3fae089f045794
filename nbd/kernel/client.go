package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/purerbd/purerbd/nbd/kernel/internal/genl"
)

// Client talks to the kernel's nbd generic netlink family and reads what
// sysfs says about nbd devices. It is safe for concurrent use; commands
// run one at a time.
type Client struct {
	conn   *genl.Conn
	family genl.Family
	sys    sysfs
	log    *slog.Logger
	trace  func(sent bool, datagram []byte)
}

// ClientConfig configures a Client. The zero value is fine.
type ClientConfig struct {
	// SysfsRoot is where sysfs is mounted (default /sys).
	SysfsRoot string
	// Logger receives debug events; nil logs nothing.
	Logger *slog.Logger
	// Trace, when set, sees every netlink datagram sent and received.
	Trace func(sent bool, datagram []byte)
}

// Open connects to the nbd family. It returns ErrNotLoaded when nbd.ko is
// not loaded.
func Open(ctx context.Context, cfg ClientConfig) (*Client, error) {
	conn, err := genl.Dial(genl.Options{Trace: cfg.Trace})
	if err != nil {
		return nil, err
	}
	fam, err := conn.ResolveFamily(ctx, familyName)
	if err != nil {
		conn.Close()
		if errors.Is(err, genl.ErrFamilyNotFound) {
			return nil, ErrNotLoaded
		}
		return nil, err
	}
	if fam.Version < familyVersion {
		conn.Close()
		return nil, fmt.Errorf("nbd generic netlink family version %d, want %d or later", fam.Version, familyVersion)
	}
	c := &Client{conn: conn, family: fam, sys: sysfsAt(cfg.SysfsRoot), log: cfg.Logger, trace: cfg.Trace}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Close closes the netlink socket.
func (c *Client) Close() error { return c.conn.Close() }

// BackendIdentifierSupported reports whether the kernel knows backend
// cookies (NBD_ATTR_BACKEND_IDENTIFIER, Linux 5.14+), which reattach
// needs. Older kernels ignore the attribute.
func (c *Client) BackendIdentifierSupported() bool {
	return c.family.MaxAttr >= attrBackendIdentifier
}

func (c *Client) execute(ctx context.Context, cmd uint8, attrs []byte) ([]genl.Message, error) {
	return c.conn.Execute(ctx, genl.Request{Family: c.family.ID, Cmd: cmd, Version: familyVersion, Attrs: attrs})
}

// Connect configures a device and returns its index. A cookie is sent
// only to kernels that know it (see BackendIdentifierSupported).
func (c *Client) Connect(ctx context.Context, r ConnectRequest) (int, error) {
	attrs, err := encodeConnect(r, c.BackendIdentifierSupported())
	if err != nil {
		return 0, &OpError{Op: "connect", Index: r.Index, Err: err}
	}
	msgs, err := c.execute(ctx, cmdConnect, attrs)
	if err != nil {
		return 0, &OpError{Op: "connect", Index: r.Index, Err: err}
	}
	index, err := parseConnectReply(msgs)
	if err != nil {
		return 0, &OpError{Op: "connect", Index: r.Index, Err: err}
	}
	c.log.Debug("nbd: connected", "index", index, "sockets", len(r.Sockets), "size", r.Size)
	return index, nil
}

// Reconfigure changes a configured device: new sockets in place of dead
// connections, size, timeouts, client flags. The kernel silently ignores
// sockets for which it has no dead connection.
func (c *Client) Reconfigure(ctx context.Context, r ReconfigureRequest) error {
	attrs, err := encodeReconfigure(r, c.BackendIdentifierSupported())
	if err != nil {
		return &OpError{Op: "reconfigure", Index: r.Index, Err: err}
	}
	if _, err := c.execute(ctx, cmdReconfigure, attrs); err != nil {
		return &OpError{Op: "reconfigure", Index: r.Index, Err: err}
	}
	return nil
}

// Disconnect asks the kernel to disconnect a device: it sends
// NBD_CMD_DISC on every connection and shuts them down. The device becomes
// free once its last opener closes it.
func (c *Client) Disconnect(ctx context.Context, index int) error {
	attrs, err := encodeIndex(index)
	if err == nil && index == AnyIndex {
		err = errors.New("no device index")
	}
	if err != nil {
		return &OpError{Op: "disconnect", Index: index, Err: err}
	}
	if _, err := c.execute(ctx, cmdDisconnect, attrs); err != nil {
		return &OpError{Op: "disconnect", Index: index, Err: err}
	}
	return nil
}

// Status lists every nbd device and whether it is configured.
func (c *Client) Status(ctx context.Context) ([]DeviceStatus, error) {
	return c.status(ctx, AnyIndex)
}

// DeviceStatus returns the status of one device; ok is false when the
// device does not exist.
func (c *Client) DeviceStatus(ctx context.Context, index int) (st DeviceStatus, ok bool, err error) {
	if index == AnyIndex {
		return DeviceStatus{}, false, &OpError{Op: "status", Index: index, Err: errors.New("no device index")}
	}
	l, err := c.status(ctx, index)
	if err != nil {
		return DeviceStatus{}, false, err
	}
	for _, d := range l {
		if d.Index == index {
			return d, true, nil
		}
	}
	return DeviceStatus{}, false, nil
}

func (c *Client) status(ctx context.Context, index int) ([]DeviceStatus, error) {
	attrs, err := encodeIndex(index)
	if err != nil {
		return nil, &OpError{Op: "status", Index: index, Err: err}
	}
	msgs, err := c.execute(ctx, cmdStatus, attrs)
	if err != nil {
		return nil, &OpError{Op: "status", Index: index, Err: err}
	}
	l, err := parseStatusReply(msgs)
	if err != nil {
		return nil, &OpError{Op: "status", Index: index, Err: err}
	}
	return l, nil
}

// FreeDevice returns the lowest-numbered device that is not configured,
// or AnyIndex when every existing device is in use (a CONNECT with
// AnyIndex then makes a new one).
func (c *Client) FreeDevice(ctx context.Context) (int, error) {
	l, err := c.Status(ctx)
	if err != nil {
		return 0, err
	}
	free := AnyIndex
	for _, d := range l {
		if !d.Connected && (free == AnyIndex || d.Index < free) {
			free = d.Index
		}
	}
	return free, nil
}

// Cookie returns the backend cookie of /dev/nbdN as sysfs shows it (empty
// when the device has none or the kernel predates cookies).
func (c *Client) Cookie(index int) (string, error) { return c.sys.backend(index) }

// FindByCookie returns the index of the device that carries cookie, or
// ErrNoSuchDevice.
func (c *Client) FindByCookie(cookie string) (int, error) { return c.sys.findByCookie(cookie) }

// DeviceSize returns the size of /dev/nbdN in bytes as the block layer
// sees it.
func (c *Client) DeviceSize(index int) (int64, error) { return c.sys.size(index) }

// Connections returns how many connections /dev/nbdN was configured
// with (its hardware queues), 0 when it is not configured.
func (c *Client) Connections(index int) (int, error) { return c.sys.queues(index) }
