package csi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// storeError turns an error from the image store into a gRPC status, with
// the code its sentinel calls for; what says what was being done. The
// message never holds the key of cred, even if a store put it there.
func storeError(err error, cred Credentials, what string, args ...any) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isSentinel(err) {
		return err // already a status, from this package
	}
	code := codes.Internal
	switch {
	case errors.Is(err, ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, ErrInGroup):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrExists):
		code = codes.AlreadyExists
	case errors.Is(err, ErrBusy), errors.Is(err, ErrHasSnapshots):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrUnauthenticated):
		code = codes.Unauthenticated
	case errors.Is(err, ErrPermission):
		code = codes.PermissionDenied
	case errors.Is(err, ErrUnsupported):
		code = codes.InvalidArgument
	case errors.Is(err, ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	msg := fmt.Sprintf(what, args...) + ": " + err.Error()
	return status.Error(code, redact(msg, cred))
}

func isSentinel(err error) bool {
	for _, s := range []error{ErrNotFound, ErrExists, ErrBusy, ErrHasSnapshots, ErrInGroup, ErrUnauthenticated, ErrPermission, ErrUnsupported, ErrUnavailable} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// redact removes a key from a message.
func redact(msg string, cred Credentials) string {
	if cred.Key == "" {
		return msg
	}
	return strings.ReplaceAll(msg, cred.Key, "<redacted>")
}

// errorMessage returns the message of a status error, or err.Error().
func errorMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}
