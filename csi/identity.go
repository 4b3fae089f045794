package csi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// probeTimeout bounds the cluster checks of one Probe call.
const probeTimeout = 5 * time.Second

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
	}
	if len(i.d.cfg.Topology) > 0 {
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	}
	// RBD images grow while mapped; the node grows the filesystem.
	caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{
		VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}})
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe reports ready when the cluster configuration loads and, for the
// controller, every configured cluster answers: a full session (cephx
// included) when the plugin has credentials for it, else a check that
// its monitors answer. The reason for not being ready is logged, since
// the response has no room for it, and sent in the trailer
// (ProbeReasonKey), with the node's warnings (ProbeWarningKey): a node
// that can attach devices but not keep them alive across a restart or a
// dropped connection is degraded, not unready, since restarting it mends
// nothing.
func (i *identity) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	err := i.d.probe(ctx)
	md := metadata.MD{}
	if err != nil {
		i.d.log.Warn("probe: not ready", "reason", err.Error())
		md.Append(ProbeReasonKey, err.Error())
	}
	if i.d.cfg.Node {
		md.Append(ProbeWarningKey, i.d.cfg.NodeServer.Warnings()...)
	}
	if len(md) > 0 {
		// Only fails outside a gRPC call (a test calling Probe directly).
		_ = grpc.SetTrailer(ctx, md)
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(err == nil)}, nil
}

func (d *Driver) probe(ctx context.Context) error {
	cs, err := d.clusters()
	if err != nil {
		return err
	}
	if !d.cfg.Controller {
		return nil
	}
	if len(cs) == 0 {
		return errors.New("the cluster config lists no clusters")
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	for _, c := range cs {
		var err error
		cred, ok := Credentials{}, false
		if d.cfg.Credentials != nil {
			cred, ok = d.cfg.Credentials(c.ID)
		}
		if ok {
			var s Session
			if s, err = d.cfg.Store.Session(ctx, c, cred); err == nil {
				err = s.Ping(ctx)
			}
		} else {
			err = d.cfg.Store.Reachable(ctx, c)
		}
		if err != nil {
			return fmt.Errorf("cluster %q: %s", c.ID, redact(err.Error(), cred))
		}
	}
	return nil
}
