package ublk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// charClassDir lists the ublk character devices, ublkc<N>, one per
// device the kernel has (started or not).
const charClassDir = "/sys/class/ublk-char"

// IDs returns the ids of the ublk devices the kernel has.
func IDs() ([]int, error) {
	ents, err := os.ReadDir(charClassDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // ublk_drv not loaded: no devices
	}
	if err != nil {
		return nil, fmt.Errorf("ublk: listing devices: %w", err)
	}
	var ids []int
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "ublkc")
		if !ok {
			continue
		}
		if id, err := strconv.Atoi(n); err == nil && id >= 0 {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Find returns the device the kernel keeps with tag (Config.Tag), or an
// error wrapping ErrNoDevice when it has none. Tags are the caller's
// to keep unique; when several devices carry the same one, Find fails.
func Find(ctx context.Context, tag uint64) (DevInfo, error) {
	if tag == 0 {
		return DevInfo{}, errors.New("ublk: find: tag 0 marks untagged devices")
	}
	ids, err := IDs()
	if err != nil {
		return DevInfo{}, err
	}
	if len(ids) == 0 {
		return DevInfo{}, fmt.Errorf("ublk: no device tagged %#x: %w", tag, ErrNoDevice)
	}
	c, err := OpenControl(ctx)
	if err != nil {
		return DevInfo{}, err
	}
	defer c.Close()
	var found []DevInfo
	for _, id := range ids {
		info, err := c.DevInfo(ctx, id)
		if errors.Is(err, ErrNoDevice) {
			continue // deleted since the listing
		}
		if err != nil {
			return DevInfo{}, err
		}
		if info.Tag == tag {
			found = append(found, info)
		}
	}
	switch len(found) {
	case 0:
		return DevInfo{}, fmt.Errorf("ublk: no device tagged %#x: %w", tag, ErrNoDevice)
	case 1:
		return found[0], nil
	}
	return DevInfo{}, fmt.Errorf("ublk: devices %d and %d both tagged %#x", found[0].ID, found[1].ID, tag)
}
