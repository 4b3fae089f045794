package rbd

// MultiConnCoherent reports that every user of this Image sees the same
// data: the Image caches nothing, a write is acknowledged only once the
// OSDs have it, and Flush has nothing left to do. One Image shared by
// several NBD connections can therefore advertise NBD_FLAG_CAN_MULTI_CONN
// (nbd.MultiConnCoherent has this signature).
func (img *Image) MultiConnCoherent() bool { return true }
