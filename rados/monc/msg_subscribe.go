package monc

import (
	"fmt"
	"sort"

	"github.com/purerbd/purerbd/rados/denc"
)

// subscribeOnetime is CEPH_SUBSCRIBE_ONETIME: send the map once, then
// forget the subscription.
const subscribeOnetime uint8 = 1

// subItem is ceph_mon_subscribe_item: the first epoch wanted (0: the
// latest) and flags.
type subItem struct {
	start uint64
	flags uint8
}

// encodeSubscribe builds the front of an MMonSubscribe, version 3:
// map<string, ceph_mon_subscribe_item> (keys sorted, as std::map is
// encoded) and the client's host name.
func encodeSubscribe(subs map[string]subItem, hostname string) []byte {
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	e := denc.NewEncoder(make([]byte, 0, 64))
	denc.PutMap(e, subs, names, func(e *denc.Encoder, k string, v subItem) {
		e.String(k)
		e.U64(v.start)
		e.U8(v.flags)
	})
	e.String(hostname)
	return e.Bytes()
}

// subscribeAck is MMonSubscribeAck: how long a subscription lasts
// before it must be renewed (only monitors without stateful
// subscriptions send it) and the cluster fsid.
type subscribeAck struct {
	interval uint32 // seconds
	fsid     denc.UUID
}

// decodeSubscribeAck parses the front of an MMonSubscribeAck. The fsid
// was added later and may be missing.
func decodeSubscribeAck(b []byte) (subscribeAck, error) {
	var a subscribeAck
	d := denc.NewDecoder(b)
	a.interval = d.U32("MMonSubscribeAck interval")
	if d.Remaining() > 0 {
		a.fsid.Decode(d)
	}
	if err := d.Err(); err != nil {
		return subscribeAck{}, fmt.Errorf("monc: MMonSubscribeAck: %w", err)
	}
	return a, nil
}
