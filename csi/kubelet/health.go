package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/csi"
)

// HealthPath is where HealthHandler answers, as livenessprobe does.
const HealthPath = "/healthz"

// DefaultHealthTimeout bounds one Probe call of the health endpoint: more
// than the plugin's own cluster checks take before they give up, less
// than the liveness probe's timeout in the shipped manifests.
const DefaultHealthTimeout = 8 * time.Second

// healthShutdownTimeout bounds the end of the health server.
const healthShutdownTimeout = 5 * time.Second

// HealthConfig configures a HealthHandler.
type HealthConfig struct {
	// CSIEndpoint is the plugin's CSI socket (e.g. unix:///csi/csi.sock).
	CSIEndpoint string
	// Timeout bounds each Probe call (DefaultHealthTimeout if 0).
	Timeout time.Duration
	// Logger receives failed checks; slog.Default() if nil.
	Logger *slog.Logger
}

// HealthHandler answers GET /healthz by calling the plugin's CSI Probe on
// its socket, as the livenessprobe sidecar does: 200 when the plugin is
// ready, 500 when it is not or does not answer in time, with a line
// saying why (the reason and any warnings come in the Probe's trailer,
// csi.ProbeReasonKey and csi.ProbeWarningKey). A plugin that works but
// lacks an ability (a node without LINK_DEAD, say) answers 200 with a
// "degraded:" line per warning: restarting it would not mend that, and
// would stall the I/O of every volume it serves.
type HealthHandler struct {
	conn    *grpc.ClientConn
	id      csipb.IdentityClient
	timeout time.Duration
	log     *slog.Logger
}

// NewHealthHandler returns a handler for cfg; Close it when done.
func NewHealthHandler(cfg HealthConfig) (*HealthHandler, error) {
	conn, err := dialCSI(cfg.CSIEndpoint)
	if err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultHealthTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &HealthHandler{conn: conn, id: csipb.NewIdentityClient(conn), timeout: cfg.Timeout, log: cfg.Logger}, nil
}

// Close closes the connection to the CSI socket.
func (h *HealthHandler) Close() error { return h.conn.Close() }

// Check calls Probe once and returns whether the plugin is ready and the
// lines that say so or why not.
func (h *HealthHandler) Check(ctx context.Context) (bool, []string) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var trailer metadata.MD
	resp, err := h.id.Probe(ctx, &csipb.ProbeRequest{}, grpc.Trailer(&trailer))
	if err != nil {
		return false, []string{"CSI Probe failed: " + status.Convert(err).Message()}
	}
	warnings := trailer.Get(csi.ProbeWarningKey)
	// A plugin that leaves ready unset is ready (CSI spec).
	if resp.GetReady() != nil && !resp.GetReady().GetValue() {
		reason := strings.Join(trailer.Get(csi.ProbeReasonKey), "; ")
		if reason == "" {
			reason = "the plugin gave no reason"
		}
		return false, append([]string{"not ready: " + reason}, prefixed("degraded: ", warnings)...)
	}
	return true, append([]string{"ok"}, prefixed("degraded: ", warnings)...)
}

func prefixed(p string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = p + l
	}
	return out
}

// ServeHTTP answers HealthPath.
func (h *HealthHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != HealthPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ok, lines := h.Check(r.Context())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	code := http.StatusOK
	if !ok {
		code = http.StatusInternalServerError
		h.log.Warn("health check failed", "reason", strings.Join(lines, "; "))
	}
	w.WriteHeader(code)
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}

// ServeHealth serves h on addr (host:port, e.g. ":9808") until ctx ends.
// ready, when not nil, receives the address listened on.
func ServeHealth(ctx context.Context, addr string, h http.Handler, ready func(net.Addr)) error {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("health endpoint: %w", err)
	}
	if ready != nil {
		ready(lis.Addr())
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), healthShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
	})
	defer stop()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("health endpoint: %w", err)
	}
	return nil
}
