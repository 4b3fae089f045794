package denc

import (
	"fmt"
	"time"
)

// UTime is Ceph's utime_t, and also the layout of ceph_timespec and of
// encoded ceph::real_time: u32 seconds and u32 nanoseconds since the Unix
// epoch.
type UTime struct {
	Sec  uint32
	Nsec uint32
}

// Timespec is ceph_timespec, encoded exactly like utime_t.
type Timespec = UTime

// UTimeOf converts t (truncated to what 32-bit seconds hold).
func UTimeOf(t time.Time) UTime {
	return UTime{Sec: uint32(t.Unix()), Nsec: uint32(t.Nanosecond())}
}

// Time converts u to a time.Time in UTC.
func (u UTime) Time() time.Time { return time.Unix(int64(u.Sec), int64(u.Nsec)).UTC() }

// IsZero reports whether u is the zero time (Ceph's "unset").
func (u UTime) IsZero() bool { return u == UTime{} }

// Decode reads a utime_t.
func (u *UTime) Decode(d *Decoder) {
	u.Sec = d.U32("utime_t sec")
	u.Nsec = d.U32("utime_t nsec")
}

// Encode writes a utime_t.
func (u UTime) Encode(e *Encoder) {
	e.U32(u.Sec)
	e.U32(u.Nsec)
}

// String formats u in UTC with microseconds, like Ceph's
// "2021-04-12T10:03:12.123456+0000".
func (u UTime) String() string {
	if u.Nsec >= 1e9 {
		return fmt.Sprintf("%d.%09d", u.Sec, u.Nsec)
	}
	return u.Time().Format("2006-01-02T15:04:05.000000-0700")
}
