package rados_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rados/cephconf"
)

// Connect through ceph.conf (CEPH_CONF), write an object and read it back.
func Example() {
	ctx := context.Background()
	conn, err := rados.ConnectFromConf(ctx, cephconf.Args{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	io, err := conn.IOContext(ctx, "rbd", "")
	if err != nil {
		log.Fatal(err)
	}
	if err := io.WriteFull(ctx, "greeting", []byte("hello, rados")); err != nil {
		log.Fatal(err)
	}
	data, err := io.ReadAll(ctx, "greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(data))
	_, err = io.Stat(ctx, "no-such-object")
	fmt.Println(errors.Is(err, rados.ErrNotFound))
	// Output:
	// hello, rados
	// true
}

// A compound write is applied atomically: here only if the object's
// "state" attribute still says "draft".
func ExampleIOContext_OperateWrite() {
	ctx := context.Background()
	conn, err := rados.ConnectFromConf(ctx, cephconf.Args{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	io, _ := conn.IOContext(ctx, "rbd", "examples")

	w := rados.NewWriteOp()
	w.WriteFull([]byte("v1"))
	w.SetXattr("state", []byte("draft"))
	if err := io.OperateWrite(ctx, "doc", w); err != nil {
		log.Fatal(err)
	}

	publish := rados.NewWriteOp()
	publish.CmpXattr("state", rados.CmpXattrEQ, []byte("draft"))
	publish.SetXattr("state", []byte("published"))
	publish.SetOmap(map[string][]byte{"published-by": []byte("example")})
	fmt.Println(io.OperateWrite(ctx, "doc", publish))
	// the same guard fails now, and nothing of the second write lands
	fmt.Println(errors.Is(io.OperateWrite(ctx, "doc", publish), rados.ErrCanceled))

	r := rados.NewReadOp()
	state := r.GetXattr("state")
	omap := r.GetOmapValues("", "", 10)
	if err := io.OperateRead(ctx, "doc", r); err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(state.Data), omap.Entries[0].Key)
	// Output:
	// <nil>
	// true
	// published published-by
}

// Omap entries are read a page at a time by the iterator.
func ExampleIOContext_Omap() {
	ctx := context.Background()
	conn, err := rados.ConnectFromConf(ctx, cephconf.Args{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	io, _ := conn.IOContext(ctx, "rbd", "examples")
	_ = io.OmapSet(ctx, "index", map[string][]byte{"b": []byte("2"), "a": []byte("1"), "c": []byte("3")})
	for kv, err := range io.Omap(ctx, "index", "") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s=%s\n", kv.Key, kv.Value)
	}
	// Output:
	// a=1
	// b=2
	// c=3
}

// A watcher acknowledges notifications; the notifier collects the
// replies.
func ExampleIOContext_Watch() {
	ctx := context.Background()
	conn, err := rados.ConnectFromConf(ctx, cephconf.Args{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	io, _ := conn.IOContext(ctx, "rbd", "examples")
	_ = io.Create(ctx, "bell", false)
	w, err := io.Watch(ctx, "bell")
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		for ev := range w.Events() {
			if ev.Err != nil {
				log.Print(ev.Err)
				continue
			}
			_ = w.Ack(ctx, ev, []byte("heard "+string(ev.Payload)))
		}
	}()
	resp, err := io.Notify(ctx, "bell", []byte("ring"), 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(resp.Acks[0].Reply))
	_ = w.Close(ctx)
	// Output:
	// heard ring
}

// Monitor commands take JSON, as the ceph tool sends them.
func ExampleConn_MonCommand() {
	ctx := context.Background()
	conn, err := rados.ConnectFromConf(ctx, cephconf.Args{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	out, _, err := conn.MonCommand(ctx, []byte(`{"prefix": "osd pool get", "pool": "rbd", "var": "pg_num", "format": "json"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
	// Output:
	// {"pool":"rbd","pool_id":1,"pg_num":16}
}
