package chaostest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/radostest"
	"github.com/purerbd/purerbd/rbd"
)

// TestRBDHonoursOpTimeout checks that rados.Config.OpTimeout (librados'
// rados_osd_op_timeout) bounds RBD image I/O as it bounds every other
// object operation: with the primary OSD of a data object stopped
// (SIGSTOP; on this one-host cluster it is never marked down), a write
// with no deadline of its own must fail after about OpTimeout instead of
// waiting for the OSD to come back. The chaos run's osd-pause fault
// relies on it.
func TestRBDHonoursOpTimeout(t *testing.T) {
	c := radostest.New(t, radostest.Options{OSDs: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const opTimeout = 3 * time.Second
	conn, err := rados.Connect(ctx, rados.Config{MonHost: c.MonHost(), Key: c.AdminKey, OpTimeout: opTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ioc, err := conn.IOContext(ctx, c.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	// no exclusive lock, no object map: a write touches one data object
	if err := rbd.Create(ctx, ioc, "timeout", 4<<20, rbd.CreateOptions{Features: rbd.FeatureLayering}); err != nil {
		t.Fatal(err)
	}
	img, err := rbd.Open(ctx, ioc, "timeout", rbd.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	buf := make([]byte, 4096)
	if _, err := img.WriteAtContext(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	loc, err := ioc.Locate("rbd_data." + img.ID() + ".0000000000000000")
	if err != nil {
		t.Fatal(err)
	}
	osd := "osd." + strconv.Itoa(int(loc.ActingPrimary))
	if err := c.Pause(osd); err != nil {
		t.Fatal(err)
	}
	resumed := make(chan struct{})
	resume := sync1(func() { c.Resume(osd); close(resumed) })
	defer resume()
	// the OSD comes back after 20 s whatever happens
	go func() {
		select {
		case <-time.After(20 * time.Second):
			resume()
		case <-resumed:
		}
	}()

	// the rados API gives up after OpTimeout
	t0 := time.Now()
	err = ioc.Write(context.Background(), "rbd_data."+img.ID()+".0000000000000000", buf, 0)
	t.Logf("rados write with %s stopped: %v after %v", osd, err, time.Since(t0).Round(time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("rados write: %v, want a deadline error", err)
	}
	// and so must RBD
	t0 = time.Now()
	_, err = img.WriteAtContext(context.Background(), buf, 0)
	took := time.Since(t0)
	t.Logf("rbd write with %s stopped: %v after %v", osd, err, took.Round(time.Millisecond))
	if err == nil || took > opTimeout+5*time.Second {
		t.Errorf("rbd write with the primary OSD stopped returned %v after %v; want an error after about the op timeout (%v)",
			err, took.Round(time.Millisecond), opTimeout)
	}
}

// sync1 returns a function that runs f once, however often it is called.
func sync1(f func()) func() {
	done := make(chan struct{}, 1)
	done <- struct{}{}
	return func() {
		select {
		case <-done:
			f()
		default:
		}
	}
}
