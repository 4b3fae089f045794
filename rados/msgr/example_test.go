package msgr_test

import (
	"context"
	"fmt"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/msgr"
)

// Dial a monitor with cephx, ask for the monitor map and wait for it.
// The same auth.CephX then opens OSD connections with the service
// tickets the monitor handed out.
func ExampleDial() {
	keyring, err := auth.ReadKeyring("/etc/ceph/ceph.client.admin.keyring")
	if err != nil {
		panic(err)
	}
	name, _ := auth.ParseName("client.admin")
	key, err := keyring.Key(name)
	if err != nil {
		panic(err)
	}
	cx, err := auth.NewCephX(name, key, 0) // monitors, OSDs and managers
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mon, err := msgr.Dial(ctx, "v2:10.0.0.1:3300/0", msgr.Config{
		Auth:     cx,
		PeerType: denc.EntityTypeMon,
		Mode:     msgr.ModePreferSecure,
	})
	if err != nil {
		panic(err) // errors.Is(err, auth.ErrAuthFailed) for a wrong key
	}
	defer mon.Close()

	const monGetMap, monMap = 5, 4
	if err := mon.Send(ctx, &msgr.Message{Type: monGetMap, Version: 1}); err != nil {
		panic(err)
	}
	for m := range mon.Incoming() {
		if m.Type == monMap {
			fmt.Println("monmap of", len(m.Front), "bytes")
			break
		}
	}
	if err := mon.Err(); err != nil {
		fmt.Println("connection ended:", err) // the owner dials again
	}

	// An OSD: the address and nonce come from the OSDMap.
	osd, err := msgr.Dial(ctx, "v2:10.0.0.2:6800/12345", msgr.Config{
		Auth:     cx,
		PeerType: denc.EntityTypeOSD,
		Nonce:    mon.LocalAddr().Nonce, // one client, one address nonce
	})
	if err != nil {
		panic(err) // auth.ErrNoTicket: renew tickets with the monitor first
	}
	defer osd.Close()
}
