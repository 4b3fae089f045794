package csi

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recoverPanics turns a panic in a call into an INTERNAL error for that
// call, so one bad request cannot end the plugin and, with the node
// service, every volume it serves. The panic and its stack are logged;
// the secrets of the request are blanked out of both (a stack holds
// argument words, not the bytes of strings, but a panic value may quote
// anything). The caller gets no detail: the log has it.
func (d *Driver) recoverPanics(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		var secrets []string
		if r, ok := req.(interface{ GetSecrets() map[string]string }); ok {
			for k, v := range r.GetSecrets() {
				// User names (userID, adminID) are not secret, and
				// blanking a short common word would blank the stack.
				if v != "" && !strings.HasSuffix(k, "ID") {
					secrets = append(secrets, v)
				}
			}
		}
		clean := func(s string) string {
			for _, v := range secrets {
				s = strings.ReplaceAll(s, v, "<redacted>")
			}
			return s
		}
		attrs := []any{"method", info.FullMethod, "panic", clean(fmt.Sprint(p)), "stack", clean(string(debug.Stack()))}
		if r, ok := req.(interface{ GetVolumeId() string }); ok && r.GetVolumeId() != "" {
			attrs = append(attrs, "volumeID", r.GetVolumeId())
		}
		d.log.Error("a CSI call panicked", attrs...)
		resp, err = nil, status.Errorf(codes.Internal, "internal error serving %s: the plugin's log has the details", info.FullMethod)
	}()
	return h(ctx, req)
}
