package luks

import "golang.org/x/sys/cpu"

// haveAESNI says whether the XTS rounds can run on the CPU's AES
// instructions (xts_amd64.s).
func haveAESNI() bool { return cpu.X86.HasAES }

// xtsEncryptBlocks encrypts n blocks of src into dst with the tweaks in
// tw (16 bytes each), under the nr-round encryption schedule xk.
//
//go:noescape
func xtsEncryptBlocks(nr int, xk *byte, dst, src, tw *byte, n int)

// xtsDecryptBlocks is xtsEncryptBlocks' inverse, under the decryption
// schedule.
//
//go:noescape
func xtsDecryptBlocks(nr int, xk *byte, dst, src, tw *byte, n int)
