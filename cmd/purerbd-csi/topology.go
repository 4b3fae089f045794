package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/kubeapi"
)

// nodeLabelsWait bounds how long a starting node plugin tries to read
// its node's labels (an API server restarting with the node).
const nodeLabelsWait = time.Minute

// nodeLabelsAtStart reads the node's labels from its Node object
// through the API server in the pod's service account dir
// (kubeapi.ServiceAccountDir) when something needs them: --domainlabels
// (topology), --enable-read-affinity, or a cluster of config.json with
// readAffinity enabled. Nil when nothing does.
func nodeLabelsAtStart(ctx context.Context, log *slog.Logger, o options, nodeID, clusterConfig, saDir string) (map[string]string, error) {
	var why []string
	if o.domainLabels != "" {
		why = append(why, "--domainlabels")
	}
	if o.readAffinity {
		why = append(why, "--enable-read-affinity")
	}
	if cs, err := csi.LoadClusters(clusterConfig); err == nil {
		for _, c := range cs {
			if c.ReadAffinity {
				why = append(why, "readAffinity of cluster "+c.ID)
			}
		}
	}
	if len(why) == 0 {
		return nil, nil
	}
	reason := strings.Join(why, ", ")
	kc, err := kubeapi.InCluster(saDir)
	if err != nil {
		return nil, fmt.Errorf("%s: the node's labels come from the API server (the node service account needs get on nodes): %w", reason, err)
	}
	c, err := kubeapi.New(kc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, nodeLabelsWait)
	defer cancel()
	for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
		labels, err := c.NodeLabels(ctx, nodeID)
		if err == nil {
			return labels, nil
		}
		var se *kubeapi.StatusError
		if errors.As(err, &se) && (se.Code == 401 || se.Code == 403 || se.Code == 404) {
			return nil, fmt.Errorf("reading the node's labels for %s: %w", reason, err)
		}
		log.Warn("reading the node's labels; retrying", "for", reason, "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading the node's labels for %s: %w", reason, err)
		case <-time.After(delay):
		}
	}
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
