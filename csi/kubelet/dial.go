// Package kubelet is what purerbd-csi offers the kubelet itself, in place
// of the node-driver-registrar and livenessprobe sidecars: registration of
// the node plugin through the kubelet's plugin-registration API
// (Registrar) and an HTTP health endpoint for the container's liveness
// probe that calls the plugin's CSI Probe (HealthHandler).
//
// Both reach the plugin the way a sidecar would, through its CSI socket,
// so they check the gRPC server that the kubelet and the sidecars use, not
// just the process.
package kubelet

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/purerbd/purerbd/csi"
)

// dialCSI returns a client connection to the CSI socket of endpoint (as
// csi.Config.Endpoint takes it). It connects lazily, on the first call.
func dialCSI(endpoint string) (*grpc.ClientConn, error) {
	path, err := csi.EndpointPath(endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix:"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("CSI socket %s: %w", path, err)
	}
	return conn, nil
}
