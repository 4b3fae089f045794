package main

import (
	"context"
	"fmt"
	"time"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/denc"
)

// `rados lock list|info|get|break`: the lock class's advisory locks on
// objects, printed in JSON as the rados tool always prints them.

// lockOptions are the rados tool's --lock-* options.
type lockOptions struct {
	tag, cookie, description, typ string
	duration                      int
}

func (o *lockOptions) register(cmd *cli.Command) {
	cmd.String(&o.tag, "--lock-tag TAG", "lock: the lock's tag")
	cmd.String(&o.cookie, "--lock-cookie COOKIE", "lock get, break: the locker's cookie")
	cmd.String(&o.description, "--lock-description TEXT", "lock get: the lock's description")
	cmd.Int(&o.duration, "--lock-duration SECS", "lock get: expire after SECS seconds")
	cmd.String(&o.typ, "--lock-type TYPE", "lock get: exclusive (default) or shared")
}

// lockCommand is the lock verb; its first argument picks the action.
func (c *radosCommand) lockCommand() *cli.Command {
	return &cli.Command{Name: "lock", Args: "list|info|get|break OBJ [NAME [LOCKER]]", MinArgs: 2, MaxArgs: cli.Unlimited,
		Summary: "advisory locks: list OBJ, info OBJ NAME, get OBJ NAME, break OBJ NAME LOCKER",
		Run:     func(ctx context.Context, inv *cli.Invocation) error { return c.lock(ctx, inv.Args) }}
}

// lockList is `rados lock list`'s output.
type lockList struct {
	Objname string     `json:"objname"`
	Locks   []lockName `json:"locks"`
}

type lockName struct {
	Name string `json:"name"`
}

// lockInfo is `rados lock info`'s output.
type lockInfo struct {
	Name    string       `json:"name"`
	Type    string       `json:"type"`
	Tag     string       `json:"tag"`
	Lockers []lockHolder `json:"lockers"`
}

type lockHolder struct {
	Name        string `json:"name"`
	Cookie      string `json:"cookie"`
	Description string `json:"description"`
	Expiration  string `json:"expiration"`
	Addr        string `json:"addr"`
}

func (c *radosCommand) lock(ctx context.Context, args []string) error {
	action, oid := args[0], args[1]
	if action == "list" {
		names, err := c.io.ListLocks(ctx, oid)
		if err != nil {
			return fmt.Errorf("ERROR: rados_list_locks(): %s", errnoText(err))
		}
		out := lockList{Objname: oid, Locks: []lockName{}}
		for _, n := range names {
			out.Locks = append(out.Locks, lockName{n})
		}
		return c.writeLockJSON(out)
	}
	if len(args) < 3 {
		return &cli.UsageError{Msg: "missing lock name"}
	}
	name := args[2]
	switch action {
	case "info":
		info, err := c.io.LockInfo(ctx, oid, name)
		if err != nil {
			return fmt.Errorf("ERROR: rados_lock_get_lock_info(): %s", errnoText(err))
		}
		out := lockInfo{Name: name, Type: info.Type.String(), Tag: info.Tag, Lockers: []lockHolder{}}
		for _, l := range info.Lockers {
			out.Lockers = append(out.Lockers, lockHolder{Name: l.Entity.String(), Cookie: l.Cookie,
				Description: l.Description, Expiration: utimeString(l.Expiration), Addr: legacyAddr(l.Addr)})
		}
		return c.writeLockJSON(out)
	case "get":
		typ := rados.LockExclusive
		switch c.lockOpt.typ {
		case "", "exclusive":
		case "shared":
			typ = rados.LockShared
		default:
			return fmt.Errorf("unknown lock type was specified, aborting")
		}
		err := c.io.Lock(ctx, oid, rados.LockRequest{Name: name, Type: uint8(typ), Cookie: c.lockOpt.cookie,
			Tag: c.lockOpt.tag, Description: c.lockOpt.description, Duration: denc.UTime{Sec: uint32(c.lockOpt.duration)}})
		if err != nil {
			return fmt.Errorf("ERROR: failed locking: %s", errnoText(err))
		}
		return nil
	case "break":
		if len(args) < 4 {
			return &cli.UsageError{Msg: "missing locker"}
		}
		locker, err := denc.ParseEntityName(args[3])
		if err != nil {
			return fmt.Errorf("ERROR: failed to parse locker name (%s)", args[3])
		}
		if err := c.io.BreakLock(ctx, oid, name, locker, c.lockOpt.cookie); err != nil {
			return fmt.Errorf("ERROR: failed breaking lock: %s", errnoText(err))
		}
		return nil
	}
	return &cli.UsageError{Msg: fmt.Sprintf("unknown lock action %q", action)}
}

// writeLockJSON prints a lock verb's output: the rados tool's lock verbs
// print JSON even without --format, indented under --pretty-format.
func (c *radosCommand) writeLockJSON(v any) error {
	if !c.out.json() {
		c.indent = c.out.pretty
	}
	return c.writeJSON(v, false)
}

// utimeString prints a time as Ceph's utime_t does: seconds and
// microseconds for a time within ten years of the epoch (a duration,
// or none), otherwise the local date.
func utimeString(u denc.UTime) string {
	if u.Sec < 60*60*24*365*10 {
		return fmt.Sprintf("%d.%06d", u.Sec, u.Nsec/1000)
	}
	return time.Unix(int64(u.Sec), int64(u.Nsec)).Local().Format("2006-01-02T15:04:05.000000-0700")
}

// legacyAddr prints an address as entity_addr_t::get_legacy_str does:
// without its type prefix.
func legacyAddr(a denc.EntityAddr) string {
	if a.Type != denc.AddrNone {
		a.Type = denc.AddrAny
	}
	return a.String()
}
