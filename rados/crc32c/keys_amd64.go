package crc32c

// foldKeys are fold512's multipliers, derived in keys_test.go: pairs for
// moving a 128-bit lane 2048 bits (one 256-byte block), 512 bits (one
// 64-byte register) and 128 bits (one lane). Read only.
var foldKeys = [6]uint64{
	0xe9a5d8be00000000, 0x1426a81500000000, // 2048
	0x1c19243b00000000, 0x75bba45b00000000, // 512
	0x3743f7bd00000000, 0x3171d43000000000, // 128
}
