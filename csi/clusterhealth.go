package csi

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Cluster reachability. The controller checks every configured cluster
// in the background (Config.ClusterCheckInterval) and keeps the outcome
// in ClusterStatus form for whoever reports it (Probe's warnings, a
// future metrics endpoint). A cluster going away or coming back is one
// log line: nothing more is logged while its state holds.
//
// It is not readiness: Probe is about the process, so that a liveness
// probe restarts a plugin that stopped answering, never one whose
// cluster is down (a restart mends nothing there, and would stop
// provisioning on the clusters that are up).

// DefaultClusterCheckInterval is how often the controller checks its
// clusters unless Config.ClusterCheckInterval says otherwise.
const DefaultClusterCheckInterval = time.Minute

// clusterCheckTimeout bounds the check of one cluster.
const clusterCheckTimeout = 5 * time.Second

// ClusterStatus is what the latest check found about one cluster.
type ClusterStatus struct {
	ClusterID string
	// Reachable says whether the cluster answered: a full session
	// (cephx included) with the plugin's credentials for it, else its
	// monitors.
	Reachable bool
	// Error says why not; credentials are never in it.
	Error string
	// Checked is when the check ended; Since is when the cluster last
	// went from reachable to not or back (the first check counts).
	Checked time.Time
	Since   time.Time
}

// clusterHealth holds the latest statuses.
type clusterHealth struct {
	mu   sync.Mutex
	byID map[string]ClusterStatus
	// configErr is the last failure to load the cluster config, "" when
	// it loaded.
	configErr string
}

// ClusterStatus returns the latest status of every configured cluster,
// sorted by cluster ID; empty before the first check.
func (d *Driver) ClusterStatus() []ClusterStatus {
	d.health.mu.Lock()
	defer d.health.mu.Unlock()
	out := make([]ClusterStatus, 0, len(d.health.byID))
	for _, s := range d.health.byID {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClusterID < out[j].ClusterID })
	return out
}

// CheckClusters checks every configured cluster now, at once, records
// the outcome, logs what changed, and returns the statuses. It fails
// only when the cluster config cannot be loaded.
func (d *Driver) CheckClusters(ctx context.Context) ([]ClusterStatus, error) {
	cs, err := d.clusters()
	d.noteConfig(err)
	if err != nil {
		return nil, err
	}
	results := make([]ClusterStatus, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.checkCluster(ctx, c)
			results[i] = ClusterStatus{ClusterID: c.ID, Reachable: err == nil, Checked: time.Now()}
			if err != nil {
				results[i].Error = err.Error()
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		// Cut short (the plugin is stopping): the outcome says nothing
		// about the clusters.
		return d.ClusterStatus(), nil
	}
	d.record(results)
	return d.ClusterStatus(), nil
}

// checkCluster checks one cluster: a session and a ping with the
// plugin's credentials for it, else an unauthenticated look at its
// monitors.
func (d *Driver) checkCluster(ctx context.Context, c Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, clusterCheckTimeout)
	defer cancel()
	cred, ok := Credentials{}, false
	if d.cfg.Credentials != nil {
		cred, ok = d.cfg.Credentials(c.ID)
	}
	var err error
	if ok {
		var s Session
		if s, err = d.cfg.Store.Session(ctx, c, cred); err == nil {
			err = s.Ping(ctx)
		}
	} else {
		err = d.cfg.Store.Reachable(ctx, c)
	}
	if err != nil {
		return fmt.Errorf("%s", redact(err.Error(), cred))
	}
	return nil
}

// record stores a round of results, logs each cluster whose
// reachability changed, and forgets clusters no longer configured.
func (d *Driver) record(results []ClusterStatus) {
	d.health.mu.Lock()
	defer d.health.mu.Unlock()
	prev := d.health.byID
	d.health.byID = make(map[string]ClusterStatus, len(results))
	for _, r := range results {
		p, known := prev[r.ClusterID]
		r.Since = r.Checked
		if known && p.Reachable == r.Reachable {
			r.Since = p.Since
		}
		d.health.byID[r.ClusterID] = r
		switch {
		case known && p.Reachable == r.Reachable:
		case r.Reachable && known:
			d.log.Info("cluster reachable again", "clusterID", r.ClusterID, "unreachable_for", r.Checked.Sub(p.Since).Round(time.Second))
		case r.Reachable:
			d.log.Info("cluster reachable", "clusterID", r.ClusterID)
		default:
			d.log.Warn("cluster unreachable", "clusterID", r.ClusterID, "error", r.Error)
		}
	}
}

// noteConfig records whether the cluster config loaded, logging a
// change.
func (d *Driver) noteConfig(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	d.health.mu.Lock()
	defer d.health.mu.Unlock()
	if msg == d.health.configErr {
		return
	}
	d.health.configErr = msg
	if msg != "" {
		d.log.Warn("cluster config unusable", "error", msg)
	} else {
		d.log.Info("cluster config usable again")
	}
}

// checkClustersEvery runs CheckClusters at once and then every interval
// until ctx is cancelled or done closed.
func (d *Driver) checkClustersEvery(ctx context.Context, done <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		// The error is logged by noteConfig, on change.
		_, _ = d.CheckClusters(ctx)
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-t.C:
		}
	}
}

// healthWarnings are Probe's warnings about the clusters: an unusable
// cluster config, and each cluster the latest check found unreachable.
func (d *Driver) healthWarnings() []string {
	var w []string
	cs, err := d.clusters()
	switch {
	case err != nil:
		w = append(w, err.Error())
	case d.cfg.Controller && len(cs) == 0:
		w = append(w, "the cluster config lists no clusters")
	}
	if !d.cfg.Controller {
		return w
	}
	for _, s := range d.ClusterStatus() {
		if !s.Reachable {
			w = append(w, fmt.Sprintf("cluster %q unreachable since %s: %s", s.ClusterID, s.Since.UTC().Format(time.RFC3339), s.Error))
		}
	}
	return w
}
