package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Trailer keys of the Probe response, for a health endpoint that wants to
// say why (the response itself has room for ready alone): the reason for
// not being ready, and one value per warning about an ability the plugin
// lacks while it is ready (a node plugin whose devices cannot be
// reattached, say). Binary keys: the texts are not limited to ASCII.
const (
	ProbeReasonKey  = "purerbd-probe-reason-bin"
	ProbeWarningKey = "purerbd-probe-warning-bin"
)

type identity struct {
	csi.UnimplementedIdentityServer
	d *Driver
}

func (i *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.d.cfg.DriverName, VendorVersion: i.d.cfg.Version}, nil
}

func (i *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	var caps []*csi.PluginCapability
	service := func(t csi.PluginCapability_Service_Type) {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
			Service: &csi.PluginCapability_Service{Type: t}}})
	}
	if i.d.cfg.Controller {
		service(csi.PluginCapability_Service_CONTROLLER_SERVICE)
		service(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE)
		service(csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE)
	}
	// As ceph-csi: the provisioner then passes accessibility requirements
	// (topologyConstrainedPools needs them) whenever nodes report
	// topology (--domainlabels), and none otherwise.
	service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	// RBD images grow while mapped; the node grows the filesystem.
	caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{
		VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}})
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe reports on the process: a plugin that answers is ready. A
// cluster that is down or a cluster config that does not load is no
// reason to restart the plugin (it would mend neither, and would stop
// the work on the clusters that are up), so neither makes it unready:
// they are warnings in the trailer (ProbeWarningKey), from the latest
// background check of the clusters (clusterhealth.go), which Probe never
// waits for, along with the node's warnings: a node that can attach
// devices but not keep them alive across a restart or a dropped
// connection is degraded. ProbeReasonKey is not sent.
func (i *identity) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	md := metadata.MD{}
	if w := i.d.healthWarnings(); len(w) > 0 {
		md.Append(ProbeWarningKey, w...)
	}
	if i.d.cfg.Node {
		md.Append(ProbeWarningKey, i.d.cfg.NodeServer.Warnings()...)
	}
	if len(md) > 0 {
		// Only fails outside a gRPC call (a test calling Probe directly).
		_ = grpc.SetTrailer(ctx, md)
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
