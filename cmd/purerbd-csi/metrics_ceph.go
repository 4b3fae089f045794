package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rados/msgr"
)

// The Ceph session metrics, one series per cluster ID and Ceph user: the
// connections the plugin holds (connections with the same user and
// another key, after a key rotation, are summed).
var (
	cephMonUpDesc = prometheus.NewDesc("purerbd_ceph_mon_session_up",
		"1 while the connection has a monitor session, else 0 (hunting for a monitor).",
		[]string{"cluster_id", "user"}, nil)
	cephMonSessionsDesc = prometheus.NewDesc("purerbd_ceph_mon_sessions_total",
		"Monitor sessions established: 1 plus the failovers to another monitor.",
		[]string{"cluster_id", "user"}, nil)
	cephOSDSessionsDesc = prometheus.NewDesc("purerbd_ceph_osd_sessions",
		"OSD sessions open.",
		[]string{"cluster_id", "user"}, nil)
	cephImagesDesc = prometheus.NewDesc("purerbd_ceph_open_images",
		"RBD images the node has open on the connection.",
		[]string{"cluster_id", "user"}, nil)
	cephOSDCounters = []struct {
		desc *prometheus.Desc
		get  func(s sessionCounters) uint64
	}{
		{prometheus.NewDesc("purerbd_ceph_osd_requests_total", "OSD requests submitted.", []string{"cluster_id", "user"}, nil),
			func(s sessionCounters) uint64 { return s.Requests }},
		{prometheus.NewDesc("purerbd_ceph_osd_resends_total", "OSD requests sent again: placement changes, session resets, EAGAIN replies, backoffs lifted.", []string{"cluster_id", "user"}, nil),
			func(s sessionCounters) uint64 { return s.Resends }},
		{prometheus.NewDesc("purerbd_ceph_osd_session_resets_total", "OSD sessions lost while open.", []string{"cluster_id", "user"}, nil),
			func(s sessionCounters) uint64 { return s.SessionResets }},
		{prometheus.NewDesc("purerbd_ceph_osd_backoffs_total", "Backoffs the OSDs asked for (MOSDBackoff block).", []string{"cluster_id", "user"}, nil),
			func(s sessionCounters) uint64 { return s.Backoffs }},
		{prometheus.NewDesc("purerbd_ceph_osdmaps_total", "OSD maps installed.", []string{"cluster_id", "user"}, nil),
			func(s sessionCounters) uint64 { return s.Maps }},
		{prometheus.NewDesc("purerbd_ceph_osd_messages_written_total", "Messages written to OSD sessions: ops, and the acks and pings of backoffs and watches.", []string{"cluster_id", "user"}, nil),
			func(s sessionCounters) uint64 { return s.Written.Messages }},
		{prometheus.NewDesc("purerbd_ceph_osd_writes_total", "Socket writes that carried the messages of OSD sessions: those queued together go out in one writev (more when the socket takes them in parts).", []string{"cluster_id", "user"}, nil),
			func(s sessionCounters) uint64 { return s.Written.Writes }},
		{prometheus.NewDesc("purerbd_ceph_osd_written_bytes_total", "Bytes of the frames written to OSD sessions.", []string{"cluster_id", "user"}, nil),
			func(s sessionCounters) uint64 { return s.Written.Bytes }},
	}
)

// sessionCounters are the summed counters of one cluster and user.
type sessionCounters struct {
	up, monSessions, osdSessions, images             uint64
	Requests, Resends, SessionResets, Backoffs, Maps uint64
	Written                                          msgr.WriteCounts
}

// sessionCollector reads the Ceph sessions at each scrape.
type sessionCollector struct {
	src sessionSource
}

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cephMonUpDesc
	ch <- cephMonSessionsDesc
	ch <- cephOSDSessionsDesc
	ch <- cephImagesDesc
	for _, d := range cephOSDCounters {
		ch <- d.desc
	}
}

func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ cluster, user string }
	sums := map[key]*sessionCounters{}
	for _, s := range c.src.Sessions() {
		k := key{s.ClusterID, s.User}
		t := sums[k]
		if t == nil {
			t = &sessionCounters{}
			sums[k] = t
		}
		if s.Mon.Connected {
			t.up = 1
		}
		t.monSessions += uint64(s.Mon.Sessions)
		t.osdSessions += uint64(s.OSD.Sessions)
		t.images += uint64(s.Images)
		t.Requests += s.OSD.Requests
		t.Resends += s.OSD.Resends
		t.SessionResets += s.OSD.SessionResets
		t.Backoffs += s.OSD.Backoffs
		t.Maps += s.OSD.Maps
		t.Written.Messages += s.OSD.Written.Messages
		t.Written.Writes += s.OSD.Written.Writes
		t.Written.Bytes += s.OSD.Written.Bytes
	}
	for k, t := range sums {
		ch <- prometheus.MustNewConstMetric(cephMonUpDesc, prometheus.GaugeValue, float64(t.up), k.cluster, k.user)
		ch <- prometheus.MustNewConstMetric(cephMonSessionsDesc, prometheus.CounterValue, float64(t.monSessions), k.cluster, k.user)
		ch <- prometheus.MustNewConstMetric(cephOSDSessionsDesc, prometheus.GaugeValue, float64(t.osdSessions), k.cluster, k.user)
		ch <- prometheus.MustNewConstMetric(cephImagesDesc, prometheus.GaugeValue, float64(t.images), k.cluster, k.user)
		for _, d := range cephOSDCounters {
			ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, float64(d.get(*t)), k.cluster, k.user)
		}
	}
}

var clusterReachableDesc = prometheus.NewDesc("purerbd_cluster_reachable",
	"Controller: 1 when the latest background check of a configured cluster reached it (--cluster-check-interval), else 0.",
	[]string{"cluster_id"}, nil)

// clusterCollector exports the controller's cluster checks
// (csi.Driver.ClusterStatus).
type clusterCollector struct {
	status func() []csi.ClusterStatus
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) { ch <- clusterReachableDesc }

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.status() {
		v := 0.0
		if s.Reachable {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(clusterReachableDesc, prometheus.GaugeValue, v, s.ClusterID)
	}
}
