package csi

// EndpointPath returns the unix socket path of a CSI endpoint as Config
// accepts it ("unix:///p", "unix:/p", "unix://p" or a plain path), for
// programs that dial the plugin's own socket.
func EndpointPath(endpoint string) (string, error) { return socketPath(endpoint) }
