#include "textflag.h"

// The XTS rounds over n 16-byte blocks with AES-NI: block i of dst is
// AES(src[i] XOR tw[i]) XOR tw[i], under the expanded key xk of nr
// rounds. Eight blocks go through the rounds together, so that each
// round's instructions overlap instead of waiting for the one before
// (an AESENC's result comes several cycles after it issues); the blocks
// left over go one at a time. All eight are loaded before any is stored,
// so dst may be src.
//
// X0-X7 hold the blocks, X8 the round key, X9 a tweak; AX points at the
// schedule, R8 at the round key, R9 counts the rounds left.

// XTS_IN8 loads the eight blocks at SI and XORs in their tweaks at DX
// and the first round key at AX.
#define XTS_IN8 \
	MOVOU 0(SI), X0; \
	MOVOU 16(SI), X1; \
	MOVOU 32(SI), X2; \
	MOVOU 48(SI), X3; \
	MOVOU 64(SI), X4; \
	MOVOU 80(SI), X5; \
	MOVOU 96(SI), X6; \
	MOVOU 112(SI), X7; \
	MOVOU 0(DX), X9; \
	PXOR X9, X0; \
	MOVOU 16(DX), X9; \
	PXOR X9, X1; \
	MOVOU 32(DX), X9; \
	PXOR X9, X2; \
	MOVOU 48(DX), X9; \
	PXOR X9, X3; \
	MOVOU 64(DX), X9; \
	PXOR X9, X4; \
	MOVOU 80(DX), X9; \
	PXOR X9, X5; \
	MOVOU 96(DX), X9; \
	PXOR X9, X6; \
	MOVOU 112(DX), X9; \
	PXOR X9, X7; \
	MOVOU (AX), X8; \
	PXOR X8, X0; \
	PXOR X8, X1; \
	PXOR X8, X2; \
	PXOR X8, X3; \
	PXOR X8, X4; \
	PXOR X8, X5; \
	PXOR X8, X6; \
	PXOR X8, X7

// XTS_ROUND8 runs one round (OP: AESENC, AESDEC or their LAST forms)
// with the round key at R8 over the eight blocks.
#define XTS_ROUND8(OP) \
	MOVOU (R8), X8; \
	OP X8, X0; \
	OP X8, X1; \
	OP X8, X2; \
	OP X8, X3; \
	OP X8, X4; \
	OP X8, X5; \
	OP X8, X6; \
	OP X8, X7

// XTS_OUT8 XORs the tweaks at DX into the eight blocks and stores them
// at DI.
#define XTS_OUT8 \
	MOVOU 0(DX), X9; \
	PXOR X9, X0; \
	MOVOU X0, 0(DI); \
	MOVOU 16(DX), X9; \
	PXOR X9, X1; \
	MOVOU X1, 16(DI); \
	MOVOU 32(DX), X9; \
	PXOR X9, X2; \
	MOVOU X2, 32(DI); \
	MOVOU 48(DX), X9; \
	PXOR X9, X3; \
	MOVOU X3, 48(DI); \
	MOVOU 64(DX), X9; \
	PXOR X9, X4; \
	MOVOU X4, 64(DI); \
	MOVOU 80(DX), X9; \
	PXOR X9, X5; \
	MOVOU X5, 80(DI); \
	MOVOU 96(DX), X9; \
	PXOR X9, X6; \
	MOVOU X6, 96(DI); \
	MOVOU 112(DX), X9; \
	PXOR X9, X7; \
	MOVOU X7, 112(DI)

// XTS_IN1 loads the block at SI and XORs in its tweak (kept in X9) and
// the first round key.
#define XTS_IN1 \
	MOVOU (SI), X0; \
	MOVOU (DX), X9; \
	PXOR X9, X0; \
	MOVOU (AX), X8; \
	PXOR X8, X0

// func xtsEncryptBlocks(nr int, xk *byte, dst, src, tw *byte, n int)
TEXT ·xtsEncryptBlocks(SB), NOSPLIT, $0-48
	MOVQ	nr+0(FP), CX
	MOVQ	xk+8(FP), AX
	MOVQ	dst+16(FP), DI
	MOVQ	src+24(FP), SI
	MOVQ	tw+32(FP), DX
	MOVQ	n+40(FP), BX

xtsEncryptBlocks8:
	CMPQ	BX, $8
	JB	xtsEncryptBlocks1
	XTS_IN8
	LEAQ	16(AX), R8
	LEAQ	-1(CX), R9
xtsEncryptBlocks8round:
	XTS_ROUND8(AESENC)
	ADDQ	$16, R8
	DECQ	R9
	JNZ	xtsEncryptBlocks8round
	XTS_ROUND8(AESENCLAST)
	XTS_OUT8
	ADDQ	$128, SI
	ADDQ	$128, DI
	ADDQ	$128, DX
	SUBQ	$8, BX
	JMP	xtsEncryptBlocks8

xtsEncryptBlocks1:
	TESTQ	BX, BX
	JZ	xtsEncryptBlocksdone
	XTS_IN1
	LEAQ	16(AX), R8
	LEAQ	-1(CX), R9
xtsEncryptBlocks1round:
	MOVOU	(R8), X8
	AESENC	X8, X0
	ADDQ	$16, R8
	DECQ	R9
	JNZ	xtsEncryptBlocks1round
	MOVOU	(R8), X8
	AESENCLAST	X8, X0
	PXOR	X9, X0
	MOVOU	X0, (DI)
	ADDQ	$16, SI
	ADDQ	$16, DI
	ADDQ	$16, DX
	DECQ	BX
	JMP	xtsEncryptBlocks1

xtsEncryptBlocksdone:
	RET

// func xtsDecryptBlocks(nr int, xk *byte, dst, src, tw *byte, n int)
//
// The same with AESDEC under the equivalent inverse cipher's schedule.
TEXT ·xtsDecryptBlocks(SB), NOSPLIT, $0-48
	MOVQ	nr+0(FP), CX
	MOVQ	xk+8(FP), AX
	MOVQ	dst+16(FP), DI
	MOVQ	src+24(FP), SI
	MOVQ	tw+32(FP), DX
	MOVQ	n+40(FP), BX

xtsDecryptBlocks8:
	CMPQ	BX, $8
	JB	xtsDecryptBlocks1
	XTS_IN8
	LEAQ	16(AX), R8
	LEAQ	-1(CX), R9
xtsDecryptBlocks8round:
	XTS_ROUND8(AESDEC)
	ADDQ	$16, R8
	DECQ	R9
	JNZ	xtsDecryptBlocks8round
	XTS_ROUND8(AESDECLAST)
	XTS_OUT8
	ADDQ	$128, SI
	ADDQ	$128, DI
	ADDQ	$128, DX
	SUBQ	$8, BX
	JMP	xtsDecryptBlocks8

xtsDecryptBlocks1:
	TESTQ	BX, BX
	JZ	xtsDecryptBlocksdone
	XTS_IN1
	LEAQ	16(AX), R8
	LEAQ	-1(CX), R9
xtsDecryptBlocks1round:
	MOVOU	(R8), X8
	AESDEC	X8, X0
	ADDQ	$16, R8
	DECQ	R9
	JNZ	xtsDecryptBlocks1round
	MOVOU	(R8), X8
	AESDECLAST	X8, X0
	PXOR	X9, X0
	MOVOU	X0, (DI)
	ADDQ	$16, SI
	ADDQ	$16, DI
	ADDQ	$16, DX
	DECQ	BX
	JMP	xtsDecryptBlocks1

xtsDecryptBlocksdone:
	RET
