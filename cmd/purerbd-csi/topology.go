package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/kubeapi"
)

// nodeTopologyWait bounds how long a starting node plugin tries to read
// its node's labels (an API server restarting with the node).
const nodeTopologyWait = time.Minute

// nodeTopology returns the node's topology segments for --domainlabels,
// read from its Node object through the API server in the pod's
// service account dir (kubeapi.ServiceAccountDir).
func nodeTopology(ctx context.Context, log *slog.Logger, domainLabels, nodeID, driverName, saDir string) (map[string]string, error) {
	if domainLabels == "" {
		return nil, nil
	}
	kc, err := kubeapi.InCluster(saDir)
	if err != nil {
		return nil, fmt.Errorf("--domainlabels needs the node's labels from the API server (the node service account needs get on nodes): %w", err)
	}
	c, err := kubeapi.New(kc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, nodeTopologyWait)
	defer cancel()
	for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
		labels, err := c.NodeLabels(ctx, nodeID)
		if err == nil {
			topo, err := csi.TopologyFromLabels(domainLabels, labels, driverName)
			if err == nil {
				log.Info("node topology from its labels", "domain_labels", domainLabels, "topology", topo)
			}
			return topo, err
		}
		var se *kubeapi.StatusError
		if errors.As(err, &se) && (se.Code == 401 || se.Code == 403 || se.Code == 404) {
			return nil, fmt.Errorf("reading the node's labels for --domainlabels: %w", err)
		}
		log.Warn("reading the node's labels for --domainlabels; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading the node's labels for --domainlabels: %w", err)
		case <-time.After(delay):
		}
	}
}
