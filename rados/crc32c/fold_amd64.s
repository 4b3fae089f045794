#include "textflag.h"

// fold512 continues the CRC-32C register crc over p, len(p) a non-zero
// multiple of 256, with AVX-512 carry-less multiplication.
//
// Four ZMM registers hold the first 256 bytes, crc XORed into the first
// four. Each round multiplies every 128-bit lane forward by 256 bytes and
// XORs in the next block. The four registers then fold into the last,
// its four lanes into one, and the CRC32 instruction reduces those 16
// bytes from a zero register: the CRC of a message is that of any value
// congruent to it modulo P, taken at the same place.
//
// func fold512(crc uint32, p []byte, keys *[6]uint64) uint32
TEXT ·fold512(SB), NOSPLIT, $0-44
	MOVL	crc+0(FP), AX
	MOVQ	p_base+8(FP), SI
	MOVQ	p_len+16(FP), CX
	MOVQ	keys+32(FP), DX

	VMOVDQU64	(SI), Z0
	VMOVDQU64	64(SI), Z1
	VMOVDQU64	128(SI), Z2
	VMOVDQU64	192(SI), Z3
	VMOVD	AX, X4
	VPXORQ	Z4, Z0, Z0
	ADDQ	$256, SI
	SUBQ	$256, CX
	VBROADCASTI32X4	(DX), Z10

loop:
	CMPQ	CX, $256
	JB	reduce
	VPCLMULQDQ	$0x00, Z10, Z0, Z4
	VPCLMULQDQ	$0x11, Z10, Z0, Z0
	VPTERNLOGD	$0x96, (SI), Z4, Z0
	VPCLMULQDQ	$0x00, Z10, Z1, Z5
	VPCLMULQDQ	$0x11, Z10, Z1, Z1
	VPTERNLOGD	$0x96, 64(SI), Z5, Z1
	VPCLMULQDQ	$0x00, Z10, Z2, Z6
	VPCLMULQDQ	$0x11, Z10, Z2, Z2
	VPTERNLOGD	$0x96, 128(SI), Z6, Z2
	VPCLMULQDQ	$0x00, Z10, Z3, Z7
	VPCLMULQDQ	$0x11, Z10, Z3, Z3
	VPTERNLOGD	$0x96, 192(SI), Z7, Z3
	ADDQ	$256, SI
	SUBQ	$256, CX
	JMP	loop

reduce:
	// Registers: Z0 into Z1 into Z2 into Z3, 64 bytes each.
	VBROADCASTI32X4	16(DX), Z10
	VPCLMULQDQ	$0x00, Z10, Z0, Z4
	VPCLMULQDQ	$0x11, Z10, Z0, Z0
	VPTERNLOGD	$0x96, Z4, Z0, Z1
	VPCLMULQDQ	$0x00, Z10, Z1, Z4
	VPCLMULQDQ	$0x11, Z10, Z1, Z1
	VPTERNLOGD	$0x96, Z4, Z1, Z2
	VPCLMULQDQ	$0x00, Z10, Z2, Z4
	VPCLMULQDQ	$0x11, Z10, Z2, Z2
	VPTERNLOGD	$0x96, Z4, Z2, Z3

	// Lanes of Z3: 0 into 1 into 2 into 3, 16 bytes each.
	VEXTRACTI32X4	$1, Z3, X1
	VEXTRACTI32X4	$2, Z3, X2
	VEXTRACTI32X4	$3, Z3, X6
	VMOVDQU	32(DX), X10
	VPCLMULQDQ	$0x00, X10, X3, X4
	VPCLMULQDQ	$0x11, X10, X3, X3
	VPXOR	X4, X1, X1
	VPXOR	X3, X1, X1
	VPCLMULQDQ	$0x00, X10, X1, X4
	VPCLMULQDQ	$0x11, X10, X1, X1
	VPXOR	X4, X2, X2
	VPXOR	X1, X2, X2
	VPCLMULQDQ	$0x00, X10, X2, X4
	VPCLMULQDQ	$0x11, X10, X2, X2
	VPXOR	X4, X6, X6
	VPXOR	X2, X6, X6

	VMOVQ	X6, R8
	VPEXTRQ	$1, X6, R9
	XORL	AX, AX
	CRC32Q	R8, AX
	CRC32Q	R9, AX
	VZEROUPPER
	MOVL	AX, ret+40(FP)
	RET
