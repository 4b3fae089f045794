// Package predecessor lets a restarted process prove that the previous
// process in the same role on this host is dead, and learn the RADOS
// client instances it used, so that it can fence exactly those instances
// (blocklist their addresses) and take their locks over at once instead
// of waiting for their watches to time out on the OSDs
// (osd_client_watch_timeout, 30 s by default).
//
// The proof is an advisory lock (flock) on a file: the kernel holds it
// for as long as the process that took it lives, whatever PID or mount
// namespace each process runs in (containers restarted in a pod see the
// same host file). A process that holds the lock knows that no earlier
// holder still runs. Beside the lock, a record file written by the holder
// names its RADOS clients (cluster fsid and address, nonce included);
// the successor reads it, fences those clients, and carries them forward
// in its own record until they expire, so that a successor killed before
// it had taken every lock over still leaves them to the next one.
package predecessor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purerbd/purerbd/rados/denc"
)

// inheritFor is how long a dead predecessor's clients are carried
// forward: the monitors' default blocklist expiry. After it a dead
// client's watches have long timed out, and its locks break the usual
// way.
const inheritFor = time.Hour

// recordVersion is the record file's format.
const recordVersion = 1

// Client is one RADOS client instance of a process: its cluster and its
// address as the OSDs file its locks and watches.
type Client struct {
	FSID  string    `json:"fsid"`
	Addr  string    `json:"addr"`
	Since time.Time `json:"since"`
}

type record struct {
	Version int       `json:"version"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// LockDev and LockIno identify the lock file the holder locked: a
	// record written under another lock file (one deleted and made
	// again while its holder lived) proves nothing about its clients.
	LockDev uint64 `json:"lock_dev"`
	LockIno uint64 `json:"lock_ino"`
	// Clients are the holder's own; Inherited its dead predecessors'.
	Clients   []Client `json:"clients"`
	Inherited []Client `json:"inherited,omitempty"`
}

// Claim is a held role: the lock file's lock and the record.
type Claim struct {
	// lock is the lock file's descriptor, held raw: an *os.File's
	// finalizer would close it, and release the role, once the Claim is
	// unreachable while the process still runs.
	lock   int
	record string // path of the record file
	log    *slog.Logger

	mu     sync.Mutex
	rec    record
	fenced map[string]*fencing // by fsid
}

// fencing is the fencing of one cluster's predecessors, done once.
type fencing struct {
	done  chan struct{}
	addrs []denc.EntityAddr
	err   error
}

// Take takes the role whose lock file is path (its directory is made if
// missing; the record is path with ".clients" appended). It waits while
// a live process holds the role — a predecessor that is shutting down —
// until ctx ends, and then returns an error: the caller should go on
// without fencing anybody. On success the predecessors' clients are
// known (Predecessors) and carried in this process' record.
func Take(ctx context.Context, path string, log *slog.Logger) (*Claim, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("predecessor: %w", err)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("predecessor: opening %s: %w", path, err)
	}
	waited := false
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			unix.Close(fd)
			return nil, fmt.Errorf("predecessor: locking %s: %w", path, err)
		}
		if !waited {
			log.Info("predecessor: another live process holds the role; waiting for it to end", "lock", path)
			waited = true
		}
		select {
		case <-ctx.Done():
			unix.Close(fd)
			return nil, fmt.Errorf("predecessor: %s is held by a live process: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("predecessor: %s: %w", path, err)
	}
	c := &Claim{lock: fd, record: path + ".clients", log: log, fenced: map[string]*fencing{}}
	prev, err := readRecord(c.record)
	switch {
	case err != nil:
		log.Warn("predecessor: the previous record is unreadable; its clients cannot be fenced at once", "record", c.record, "err", err)
	case prev.LockIno != 0 && (prev.LockDev != uint64(st.Dev) || prev.LockIno != st.Ino):
		// its holder may still run, holding the old file's lock
		log.Warn("predecessor: the previous record was written under another lock file (it was replaced); not fencing its clients",
			"lock", path)
		prev = record{}
	}
	now := time.Now()
	var inherited []Client
	for _, cl := range append(prev.Clients, prev.Inherited...) {
		if now.Sub(cl.Since) < inheritFor && !slices.Contains(inherited, cl) {
			inherited = append(inherited, cl)
		}
	}
	c.rec = record{Version: recordVersion, PID: os.Getpid(), Started: now, Inherited: inherited,
		LockDev: uint64(st.Dev), LockIno: st.Ino}
	if err := c.writeLocked(); err != nil {
		c.Close()
		return nil, err
	}
	if len(inherited) > 0 {
		log.Info("predecessor: the previous process is gone; its clients will be fenced", "clients", len(inherited), "pid", prev.PID)
	}
	return c, nil
}

func readRecord(path string) (record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return record{}, nil
	}
	if err != nil {
		return record{}, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, err
	}
	if r.Version != recordVersion {
		return record{}, fmt.Errorf("record version %d, want %d", r.Version, recordVersion)
	}
	return r, nil
}

// writeLocked replaces the record file atomically. c.mu is held (or c is
// not yet shared).
func (c *Claim) writeLocked() error {
	b, err := json.Marshal(c.rec)
	if err != nil {
		return err
	}
	tmp := c.record + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("predecessor: %w", err)
	}
	if err := os.Rename(tmp, c.record); err != nil {
		return fmt.Errorf("predecessor: %w", err)
	}
	return nil
}

// Predecessors returns the dead predecessors' client addresses on the
// cluster fsid.
func (c *Claim) Predecessors(fsid string) []denc.EntityAddr {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []denc.EntityAddr
	for _, cl := range c.rec.Inherited {
		if cl.FSID != fsid {
			continue
		}
		a, err := denc.ParseEntityAddr(cl.Addr)
		if err != nil {
			c.log.Warn("predecessor: unreadable address in the record", "addr", cl.Addr, "err", err)
			continue
		}
		out = append(out, a)
	}
	return out
}

// Record adds one of this process' clients to the record. Call it
// before the client takes any lock: a successor fences only the clients
// recorded.
func (c *Claim) Record(fsid string, addr denc.EntityAddr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := Client{FSID: fsid, Addr: addr.String(), Since: time.Now()}
	for _, have := range c.rec.Clients {
		if have.FSID == cl.FSID && have.Addr == cl.Addr {
			return nil
		}
	}
	c.rec.Clients = append(c.rec.Clients, cl)
	return c.writeLocked()
}

// Forget removes a client this process closed cleanly (its locks
// released): a successor need not fence it.
func (c *Claim) Forget(fsid string, addr denc.EntityAddr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := addr.String()
	n := len(c.rec.Clients)
	c.rec.Clients = slices.DeleteFunc(c.rec.Clients, func(cl Client) bool { return cl.FSID == fsid && cl.Addr == s })
	if len(c.rec.Clients) == n {
		return nil
	}
	return c.writeLocked()
}

// Settle forgets the dead predecessors' clients once this process has
// taken over everything they held (every lock of theirs broken): a
// successor of this process then fences only its own clients, not a
// chain of generations that grows with every crash.
func (c *Claim) Settle() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rec.Inherited) == 0 {
		return nil
	}
	c.rec.Inherited = nil
	return c.writeLocked()
}

// Close releases the role (the lock; the record stays for the next
// holder, naming clients that are now closed or dead).
func (c *Claim) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock < 0 {
		return nil
	}
	err := unix.Close(c.lock)
	c.lock = -1
	return err
}
