package genl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is a NETLINK_GENERIC socket that runs one request at a time.
type Conn struct {
	f     *os.File
	raw   syscall.RawConn
	port  uint32
	trace func(sent bool, datagram []byte)

	mu  sync.Mutex // one exchange at a time; guards seq
	seq uint32
}

// Options tune a Conn.
type Options struct {
	// Trace, when set, sees every datagram sent (sent=true) and received,
	// for debugging and for capturing test vectors.
	Trace func(sent bool, datagram []byte)
}

// Dial opens a generic netlink socket. It asks the kernel for extended
// acknowledgements (error messages) and capped acknowledgements, and
// goes on without them on kernels that have neither.
func Dial(opts Options) (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("genl: socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("genl: bind: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("genl: getsockname: %w", err)
	}
	var port uint32
	if nl, ok := sa.(*unix.SockaddrNetlink); ok {
		port = nl.Pid
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	// The descriptor is non-blocking, so os.File registers it with the
	// runtime poller and read deadlines work on it.
	f := os.NewFile(uintptr(fd), "genetlink")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("genl: %w", err)
	}
	return &Conn{f: f, raw: raw, port: port, trace: opts.Trace, seq: uint32(time.Now().UnixNano())}, nil
}

// Close closes the socket.
func (c *Conn) Close() error { return c.f.Close() }

// Request is one generic netlink command.
type Request struct {
	Family  uint16
	Cmd     uint8
	Version uint8
	// Flags are added to NLM_F_REQUEST|NLM_F_ACK.
	Flags uint16
	Attrs []byte
}

// Execute sends req and returns the messages the kernel answered with,
// up to its acknowledgement. A negative acknowledgement is returned as an
// *Error. Replies and the acknowledgement may come in separate datagrams;
// each is read whole and copied out before the next. ctx bounds the wait
// for the answer (the kernel runs the command itself while sending).
func (c *Conn) Execute(ctx context.Context, req Request) ([]Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	seq := c.seq
	b, err := encodeRequest(req.Family, FlagRequest|FlagAck|req.Flags, seq, req.Cmd, req.Version, req.Attrs)
	if err != nil {
		return nil, err
	}
	if err := c.send(b); err != nil {
		return nil, err
	}

	return c.await(ctx, seq, req.Flags&FlagDump == FlagDump)
}

// await collects the answers to request seq up to its acknowledgement
// (or NLMSG_DONE for a dump).
func (c *Conn) await(ctx context.Context, seq uint32, dump bool) ([]Message, error) {
	var replies []Message
	err := c.bounded(ctx, func() error {
		for {
			d, err := c.receive()
			if err != nil {
				return err
			}
			msgs, err := ParseMessages(d)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				if m.Header.Seq != seq {
					continue // an answer to an earlier, abandoned exchange
				}
				switch m.Header.Type {
				case typeError:
					return ParseAck(m)
				case typeNoop:
				case typeDone:
					if dump {
						return nil
					}
				default:
					replies = append(replies, m)
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return replies, nil
}

// bounded runs read, which reads from the socket, so that the end of ctx
// interrupts it; it returns ctx's error when that is why read failed.
func (c *Conn) bounded(ctx context.Context, read func() error) error {
	stop := context.AfterFunc(ctx, func() { c.f.SetReadDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			// The deadline was set after ctx ended; clear it for the next
			// read.
			c.f.SetReadDeadline(time.Time{})
		}
	}()
	if err := read(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}

func (c *Conn) send(b []byte) error {
	if c.trace != nil {
		c.trace(true, b)
	}
	var serr error
	err := c.raw.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("genl: send: %w", err)
	}
	return nil
}

// receive reads one datagram from the kernel, sized to fit.
func (c *Conn) receive() ([]byte, error) {
	for {
		var (
			buf  []byte
			from unix.Sockaddr
			rerr error
		)
		err := c.raw.Read(func(fd uintptr) bool {
			var peek [headerLen]byte
			n, _, err := unix.Recvfrom(int(fd), peek[:], unix.MSG_PEEK|unix.MSG_TRUNC)
			if err == unix.EAGAIN {
				return false
			}
			if err != nil {
				rerr = err
				return true
			}
			buf = make([]byte, max(n, headerLen))
			n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
			if rerr == nil {
				buf = buf[:n]
			}
			return rerr != unix.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, fmt.Errorf("genl: receive: %w", context.DeadlineExceeded)
			}
			return nil, fmt.Errorf("genl: receive: %w", err)
		}
		if nl, ok := from.(*unix.SockaddrNetlink); ok && nl.Pid != 0 {
			continue // not from the kernel
		}
		if c.trace != nil {
			c.trace(false, buf)
		}
		return buf, nil
	}
}
