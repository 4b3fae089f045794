// Package osdc is the objecter: the client side of Ceph's OSD protocol.
//
// It encodes MOSDOp requests and decodes MOSDOpReply, MWatchNotify,
// MOSDBackoff and MOSDMap messages; builds the individual object
// operations (reads, writes, xattrs, omap, class calls, listing,
// watch/notify); and runs an Objecter, which sends requests to the right
// OSD and sees each one through to a reply:
//
//   - placement: object name -> placement group -> acting primary, from
//     the current OSD map (rados/osdmap);
//   - one msgr2 session per OSD, opened lazily with a cephx authorizer,
//     with any number of requests in flight on it, replies matched by
//     transaction id on the connection's reader, which wakes the
//     request's caller itself (other messages go to the session's
//     goroutine, in order);
//   - resending: when the map changes a request's placement (primary,
//     acting set, split or merge), when a session fails and is reopened,
//     on EAGAIN and on redirects — always with the same transaction id, so
//     the OSD recognises a write it already applied;
//   - flow control: MOSDBackoff block/unblock ranges, and the map's
//     PAUSERD/PAUSEWR/FULL flags, hold requests back without losing them;
//   - linger requests: watches (kept registered across session resets
//     and map changes, pinged, errors delivered to the watcher) and
//     notifies.
//
// Every blocking call takes a context; cancelling it abandons the request
// (the OSD may still execute it, as with librados) and leaves nothing
// behind. The objecter does not talk to monitors itself: a MapSource (the
// monitor client) feeds it OSD maps and is asked for newer ones.
package osdc
