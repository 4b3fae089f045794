package csi

import (
	"fmt"
	"math/bits"
	"strconv"
)

// imageLayout is how a new image lays its data out over RADOS objects:
// the object size and RBD's striping, from a class's objectSize,
// stripeUnit and stripeCount (ceph-csi's names and rules). Zero fields
// keep the defaults: 4 MiB objects, a stripe unit of one object and a
// stripe count of one, or for a clone its parent's layout.
type imageLayout struct {
	ObjectSize  uint64
	StripeUnit  uint64
	StripeCount uint64
}

// The object sizes RBD allows: orders 12 to 25.
const (
	minObjectSize     = 4 << 10
	maxObjectSize     = 32 << 20
	defaultObjectSize = 4 << 20
)

// parseLayout reads and checks the layout parameters. As in ceph-csi,
// stripeUnit and stripeCount come together and objectSize is a power of
// two; as in librbd, the stripe unit divides the object size.
func parseLayout(params map[string]string) (imageLayout, error) {
	var l imageLayout
	num := func(key string) (uint64, bool, error) {
		v, ok := params[key]
		if !ok || v == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, true, fmt.Errorf("%s %q is not a number of bytes", key, v)
		}
		if n == 0 {
			return 0, true, fmt.Errorf("%s is 0; leave it out for the default", key)
		}
		return n, true, nil
	}
	var err error
	var hasObj, hasUnit, hasCount bool
	if l.ObjectSize, hasObj, err = num(paramObjectSize); err != nil {
		return l, err
	}
	if hasObj && (bits.OnesCount64(l.ObjectSize) != 1 || l.ObjectSize < minObjectSize || l.ObjectSize > maxObjectSize) {
		return l, fmt.Errorf("%s %d is not a power of two from %d (4 KiB) to %d (32 MiB)", paramObjectSize, l.ObjectSize, minObjectSize, maxObjectSize)
	}
	if l.StripeUnit, hasUnit, err = num(paramStripeUnit); err != nil {
		return l, err
	}
	// stripeCount counts objects, not bytes.
	if v := params[paramStripeCount]; v != "" {
		n, perr := strconv.ParseUint(v, 10, 64)
		if perr != nil || n == 0 {
			return l, fmt.Errorf("%s %q is not a positive number of objects", paramStripeCount, v)
		}
		l.StripeCount, hasCount = n, true
	}
	switch {
	case hasUnit && !hasCount:
		return l, fmt.Errorf("%s needs %s (ceph-csi's rule: both or neither)", paramStripeUnit, paramStripeCount)
	case hasCount && !hasUnit:
		return l, fmt.Errorf("%s needs %s (ceph-csi's rule: both or neither)", paramStripeCount, paramStripeUnit)
	}
	obj := l.ObjectSize
	if obj == 0 {
		obj = defaultObjectSize
	}
	if hasUnit && (l.StripeUnit > obj || obj%l.StripeUnit != 0) {
		return l, fmt.Errorf("%s %d does not divide the object size %d (%s)", paramStripeUnit, l.StripeUnit, obj, paramObjectSize)
	}
	return l, nil
}

// order is log2 of the object size, 0 for the default.
func (l imageLayout) order() uint8 {
	if l.ObjectSize == 0 {
		return 0
	}
	return uint8(bits.TrailingZeros64(l.ObjectSize))
}
