package monc

// Message types of the monitor protocol (CEPH_MSG_*, MSG_*).
const (
	msgMonMap             = 4
	msgMonGetOSDMap       = 6
	msgMonSubscribe       = 15
	msgMonSubscribeAck    = 16
	msgAuth               = 17
	msgAuthReply          = 18
	msgMonGetVersion      = 19
	msgMonGetVersionReply = 20
	msgMonCommand         = 50
	msgMonCommandAck      = 51
	msgConfig             = 62

	// MsgOSDMap is CEPH_MSG_OSD_MAP: the MOSDMap messages a subscription
	// delivers, for the next layer to decode.
	MsgOSDMap = 41
)
