//go:build !amd64

package luks

func haveAESNI() bool { return false }

func xtsEncryptBlocks(int, *byte, *byte, *byte, *byte, int) { panic("luks: no AES-NI path") }

func xtsDecryptBlocks(int, *byte, *byte, *byte, *byte, int) { panic("luks: no AES-NI path") }
