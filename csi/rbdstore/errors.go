package rbdstore

import (
	"errors"
	"fmt"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/rados"
	"github.com/purerbd/purerbd/rbd"
)

// mapErr adds the csi sentinel that says what an error from rados or rbd
// means to the controller; errors.Is still finds the original.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	var hunt *rados.HuntError
	var sentinel error
	switch {
	case errors.Is(err, rados.ErrAuthFailed):
		sentinel = csi.ErrUnauthenticated
	case errors.Is(err, rados.ErrPermissionDenied), errors.Is(err, rados.ErrAccessDenied):
		sentinel = csi.ErrPermission
	case errors.Is(err, rbd.ErrNotFound), errors.Is(err, rados.ErrPoolNotFound), errors.Is(err, rados.ErrNotFound):
		sentinel = csi.ErrNotFound
	case errors.Is(err, rbd.ErrInGroup):
		sentinel = csi.ErrInGroup
	case errors.Is(err, rbd.ErrExists), errors.Is(err, rados.ErrExists):
		sentinel = csi.ErrExists
	case errors.Is(err, rbd.ErrHasSnapshots):
		sentinel = csi.ErrHasSnapshots
	case errors.Is(err, rbd.ErrBusy), errors.Is(err, rbd.ErrHasChildren),
		errors.Is(err, rbd.ErrProtected), errors.Is(err, rbd.ErrLockedExternally):
		sentinel = csi.ErrBusy
	case errors.Is(err, rbd.ErrUnsupportedFeature), errors.Is(err, rbd.ErrInvalid):
		sentinel = csi.ErrUnsupported
	case errors.As(err, &hunt), errors.Is(err, rados.ErrClosed), errors.Is(err, rados.ErrNotConnected):
		sentinel = csi.ErrUnavailable
	default:
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}
