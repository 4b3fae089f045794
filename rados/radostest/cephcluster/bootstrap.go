package cephcluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

func newUUID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("cephcluster: random uuid: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// run runs a setup command, logging its output to log/setup.log.
func (c *Cluster) run(ctx context.Context, bin string, args ...string) error {
	out, err := c.command(ctx, bin, args...).CombinedOutput()
	if f, ferr := os.OpenFile(filepath.Join(c.Dir, "log", "setup.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
		fmt.Fprintf(f, "$ %s %s\n%s", bin, strings.Join(args, " "), out)
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("cephcluster: %s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c *Cluster) bootstrap(ctx context.Context) error {
	o := c.Options
	var err error
	if c.FSID, err = newUUID(); err != nil {
		return err
	}
	for _, d := range []string{"mon", "osd", "mgr/ceph-x", "run", "log", "crash", "tmp"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return fmt.Errorf("cephcluster: %w", err)
		}
	}
	monKey, err := newKey(c.keyType())
	if err != nil {
		return err
	}
	if c.AdminKey, err = newKey(c.keyType()); err != nil {
		return err
	}
	mgrKey, err := newKey(c.keyType())
	if err != nil {
		return err
	}
	admin := keyringEntry{name: "client.admin", key: c.AdminKey, caps: allCaps()}
	mgr := keyringEntry{name: "mgr.x", key: mgrKey, caps: [][2]string{
		{"mon", "allow profile mgr"}, {"osd", "allow *"}, {"mds", "allow *"}}}
	monKeyring := filepath.Join(c.Dir, "tmp", "mon.keyring")
	// mkfs imports every key of the mon keyring into the auth database,
	// which saves an `auth get-or-create` round trip for the mgr
	if err := writeKeyring(monKeyring, keyringEntry{name: "mon.", key: monKey, caps: [][2]string{{"mon", "allow *"}}}, admin, mgr); err != nil {
		return err
	}
	if err := writeKeyring(c.AdminKeyring, admin); err != nil {
		return err
	}
	if err := writeKeyring(filepath.Join(c.Dir, "mgr", "ceph-x", "keyring"), mgr); err != nil {
		return err
	}
	if err := c.writeConf(); err != nil {
		return err
	}

	monmap := filepath.Join(c.Dir, "tmp", "monmap")
	args := []string{"--create", "--clobber", "--fsid", c.FSID}
	for i, n := range c.MonNames {
		addr := "[v2:" + c.MonAddrs[i]
		if c.MonV1Addrs != nil {
			addr += ",v1:" + c.MonV1Addrs[i]
		}
		args = append(args, "--addv", n, addr+"]")
	}
	if err := c.run(ctx, "monmaptool", append(args, monmap)...); err != nil {
		return err
	}
	if err := parallel(len(c.MonNames), func(i int) error {
		return c.run(ctx, "ceph-mon", "-c", c.Conf, "--mkfs", "-i", c.MonNames[i], "--monmap", monmap, "--keyring", monKeyring)
	}); err != nil {
		return err
	}
	for _, n := range c.MonNames {
		if err := c.spawn("mon."+n, "ceph-mon", "-i", n); err != nil {
			return err
		}
	}
	if err := c.WaitQuorum(ctx); err != nil {
		return err
	}
	if err := c.createOSDs(ctx); err != nil {
		return err
	}
	if o.WithMgr {
		if err := c.spawn("mgr.x", "ceph-mgr", "-i", "x"); err != nil {
			return err
		}
	}
	if err := c.WaitOSDsUp(ctx); err != nil {
		return err
	}
	if o.Pool != "-" {
		pg := strconv.Itoa(o.PGNum)
		if _, err := c.Ceph(ctx, "osd", "pool", "create", o.Pool, pg, pg, "replicated"); err != nil {
			return fmt.Errorf("cephcluster: %w", err)
		}
		if _, err := c.Rbd(ctx, "pool", "init", o.Pool); err != nil {
			return fmt.Errorf("cephcluster: %w", err)
		}
		c.Pool = o.Pool
	}
	return nil
}

// createOSDs registers each OSD with the mons, makes its store and starts it.
func (c *Cluster) createOSDs(ctx context.Context) error {
	n := c.Options.OSDs
	uuids := make([]string, n)
	keys := make([]string, n)
	for i := 0; i < n; i++ {
		var err error
		if uuids[i], err = newUUID(); err != nil {
			return err
		}
		if keys[i], err = newKey(c.keyType()); err != nil {
			return err
		}
		in, _ := json.Marshal(map[string]string{"cephx_secret": keys[i]})
		out, err := c.ToolInput(ctx, in, "ceph", "osd", "new", uuids[i], "-i", "-")
		if err != nil {
			return fmt.Errorf("cephcluster: registering osd.%d: %w", i, err)
		}
		if id := strings.TrimSpace(string(out)); id != strconv.Itoa(i) {
			return fmt.Errorf("cephcluster: expected osd id %d, got %q", i, id)
		}
	}
	err := parallel(n, func(i int) error { return c.mkfsOSD(ctx, i, keys[i], uuids[i]) })
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := c.spawn("osd."+strconv.Itoa(i), "ceph-osd", "-i", strconv.Itoa(i)); err != nil {
			return err
		}
	}
	return nil
}

// mkfsOSD writes osd.i's keyring and makes its store.
func (c *Cluster) mkfsOSD(ctx context.Context, i int, key, uuid string) error {
	name := "osd." + strconv.Itoa(i)
	dir := filepath.Join(c.Dir, "osd", "ceph-"+strconv.Itoa(i))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cephcluster: %w", err)
	}
	if err := writeKeyring(filepath.Join(dir, "keyring"), keyringEntry{name: name, key: key}); err != nil {
		return err
	}
	mkfs := func() error {
		return c.run(ctx, "ceph-osd", "-c", c.Conf, "-i", strconv.Itoa(i), "--mkfs", "--key", key, "--osd-uuid", uuid)
	}
	err := mkfs()
	if err == nil || !strings.Contains(err.Error(), "failed to fetch mon config") {
		return err
	}
	// `osd new` can answer before the key it adds is committed (seen on
	// Reef at its default propose interval): the mons then refuse the
	// OSD before it touches its store, so it can start over once the
	// key is there.
	if werr := c.waitUntil(ctx, name+"'s key", func(ctx context.Context) error {
		_, err := c.Ceph(ctx, "auth", "get", name)
		return err
	}); werr != nil {
		return fmt.Errorf("%w (after: %w)", werr, err)
	}
	return mkfs()
}

func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = f(i)
		}(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WaitQuorum waits until every mon of the cluster that is running is in
// the quorum.
func (c *Cluster) WaitQuorum(ctx context.Context) error {
	return c.waitUntil(ctx, "mon quorum", func(ctx context.Context) error {
		out, err := c.Ceph(ctx, "quorum_status", "-f", "json")
		if err != nil {
			return err
		}
		var q struct {
			QuorumNames []string `json:"quorum_names"`
		}
		if err := json.Unmarshal(out, &q); err != nil {
			return fmt.Errorf("quorum_status: %w", err)
		}
		want := 0
		for _, n := range c.MonNames {
			if c.PID("mon."+n) != 0 {
				want++
			}
		}
		if len(q.QuorumNames) < want {
			return fmt.Errorf("quorum %v, want %d mons", q.QuorumNames, want)
		}
		return nil
	})
}

// WaitOSDsUp waits until every OSD that is running is up and in.
func (c *Cluster) WaitOSDsUp(ctx context.Context) error {
	return c.waitUntil(ctx, "OSDs up and in", func(ctx context.Context) error {
		out, err := c.Ceph(ctx, "osd", "dump", "-f", "json")
		if err != nil {
			return err
		}
		var d struct {
			OSDs []struct {
				OSD int `json:"osd"`
				Up  int `json:"up"`
				In  int `json:"in"`
			} `json:"osds"`
		}
		if err := json.Unmarshal(out, &d); err != nil {
			return fmt.Errorf("osd dump: %w", err)
		}
		for _, o := range d.OSDs {
			if c.PID("osd."+strconv.Itoa(o.OSD)) != 0 && (o.Up == 0 || o.In == 0) {
				return fmt.Errorf("osd.%d up=%d in=%d", o.OSD, o.Up, o.In)
			}
		}
		if len(d.OSDs) < c.Options.OSDs {
			return fmt.Errorf("%d OSDs in the map, want %d", len(d.OSDs), c.Options.OSDs)
		}
		return nil
	})
}
