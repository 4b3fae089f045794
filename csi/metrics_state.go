package csi

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// volumeStatus is what a scrape reads of a staged volume's state.
type volumeStatus struct {
	id     string
	device string // /dev/nbdN, "" when not known
	mode   string // "filesystem" or "block"
	held   bool   // no server in this process: the kernel holds its I/O
	lock   *LockState
}

// LockState is what an open image tells of its exclusive lock
// (an optional method of NodeImage, see lockReporter).
type LockState struct {
	// Owner says this client holds the lock now.
	Owner bool
	// Handovers counts the times this client released the lock at
	// another client's request since the image was opened.
	Handovers int64
}

// lockReporter is implemented by node images that have an exclusive
// lock to report (package csi/rbdstore's).
type lockReporter interface {
	// LockState returns the lock's state; ok is false when the image
	// takes no exclusive lock (no such feature, or opened read-only).
	LockState() (s LockState, ok bool)
}

var (
	volumeInfoDesc = prometheus.NewDesc("purerbd_volume_info",
		"A staged volume (always 1), with its NBD device and access mode (filesystem or block).",
		[]string{"volume_id", "device", "mode"}, nil)
	volumeHeldDesc = prometheus.NewDesc("purerbd_volume_io_held",
		"1 while a staged volume has no server in this process (waiting for a reattach or for credentials, or its device is lost), so that the kernel holds or fails its I/O; else 0.",
		[]string{"volume_id"}, nil)
	lockOwnerDesc = prometheus.NewDesc("purerbd_volume_lock_owner",
		"1 while the node holds the exclusive lock of a staged volume's image, else 0 (absent for images without the exclusive-lock feature or read-only).",
		[]string{"volume_id"}, nil)
	lockHandoversDesc = prometheus.NewDesc("purerbd_volume_lock_handovers_total",
		"Times the node released the exclusive lock of a staged volume's image at another client's request (a snapshot, a resize, another writer), since the image was opened.",
		[]string{"volume_id"}, nil)
)

// volumeStateCollector reads the staged volumes' state at each scrape
// from the node service that feeds it (setSource).
type volumeStateCollector struct {
	mu     sync.Mutex
	source func() []volumeStatus
}

func (c *volumeStateCollector) setSource(f func() []volumeStatus) {
	c.mu.Lock()
	c.source = f
	c.mu.Unlock()
}

func (c *volumeStateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- volumeInfoDesc
	ch <- volumeHeldDesc
	ch <- lockOwnerDesc
	ch <- lockHandoversDesc
}

func (c *volumeStateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.source
	c.mu.Unlock()
	if f == nil {
		return
	}
	for _, v := range f() {
		ch <- prometheus.MustNewConstMetric(volumeInfoDesc, prometheus.GaugeValue, 1, v.id, v.device, v.mode)
		ch <- prometheus.MustNewConstMetric(volumeHeldDesc, prometheus.GaugeValue, boolValue(v.held), v.id)
		if v.lock != nil {
			ch <- prometheus.MustNewConstMetric(lockOwnerDesc, prometheus.GaugeValue, boolValue(v.lock.Owner), v.id)
			ch <- prometheus.MustNewConstMetric(lockHandoversDesc, prometheus.CounterValue, float64(v.lock.Handovers), v.id)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// volumeStatuses is the node's source for the volume state collector.
func (n *NodeServer) volumeStatuses() []volumeStatus {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]volumeStatus, 0, len(n.vols))
	for id, v := range n.vols {
		s := volumeStatus{id: id, device: v.rec.DevicePath(), mode: "filesystem"}
		if v.rec.Block {
			s.mode = "block"
		}
		s.held = v.dev == nil || v.broken != nil
		if v.dev != nil {
			select {
			case <-v.dev.Done():
				s.held = true
			default:
			}
		}
		if r, ok := v.img.(lockReporter); ok {
			if ls, ok := r.LockState(); ok {
				s.lock = &ls
			}
		}
		out = append(out, s)
	}
	return out
}
