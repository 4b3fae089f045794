package luks

import (
	"bytes"
	"crypto/aes"
	"math/rand/v2"
	"testing"

	"golang.org/x/crypto/xts"
)

// TestAESKeySchedule holds the expanded schedules to crypto/aes: with a
// zero tweak an XTS block is the bare cipher, so one block through the
// assembly in each direction checks every round key.
func TestAESKeySchedule(t *testing.T) {
	if !assemblyPath(t) {
		return
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{16, 24, 32} {
		for range 50 {
			key, in := make([]byte, size), make([]byte, 16)
			fillRandom(rng, key)
			fillRandom(rng, in)
			ref, err := aes.NewCipher(key)
			if err != nil {
				t.Fatal(err)
			}
			k := expandAESKey(key)
			var zero [16]byte
			want, got := make([]byte, 16), make([]byte, 16)
			ref.Encrypt(want, in)
			xtsEncryptBlocks(k.rounds, &k.enc[0], &got[0], &in[0], &zero[0], 1)
			if !bytes.Equal(got, want) {
				t.Fatalf("AES-%d encrypt with key %x: %x, crypto/aes %x", 8*size, key, got, want)
			}
			ref.Decrypt(want, in)
			xtsDecryptBlocks(k.rounds, &k.dec[0], &got[0], &in[0], &zero[0], 1)
			if !bytes.Equal(got, want) {
				t.Fatalf("AES-%d decrypt with key %x: %x, crypto/aes %x", 8*size, key, got, want)
			}
		}
	}
}

// TestSectorCipherMatchesReference: the AES-NI path gives x/crypto/xts's
// bytes both ways, for both LUKS key sizes, every sector size, runs of
// several sectors at any offset, in place and not, and tweaks whose
// doubling carries.
func TestSectorCipherMatchesReference(t *testing.T) {
	if !assemblyPath(t) {
		return
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, keySize := range []int{32, 64} {
		for _, sectorSize := range []int{512, 1024, 2048, 4096} {
			for range 20 {
				key := make([]byte, keySize)
				fillRandom(rng, key)
				tweak := rng.Uint64() >> rng.IntN(64)
				off := int64(rng.IntN(1<<20)) * int64(sectorSize)
				src := make([]byte, sectorSize*(1+rng.IntN(4)))
				fillRandom(rng, src)
				checkAgainstReference(t, key, sectorSize, tweak, off, src)
			}
		}
	}
}

// checkAgainstReference encrypts and decrypts src on both paths and fails
// t where they differ.
func checkAgainstReference(t *testing.T, key []byte, sectorSize int, tweak uint64, off int64, src []byte) {
	t.Helper()
	fast, err := newSectorCipherPath(key, sectorSize, tweak, true)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := xts.NewCipher(aes.NewCipher, key)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, len(src))
	for i := 0; i < len(src); i += sectorSize {
		ref.Encrypt(want[i:i+sectorSize], src[i:i+sectorSize], uint64(off+int64(i))/512+tweak)
	}
	got := make([]byte, len(src))
	fast.encrypt(got, src, off)
	if !bytes.Equal(got, want) {
		t.Fatalf("key %d bytes, sector %d, tweak %d, off %d: ciphertext differs from x/crypto/xts", len(key), sectorSize, tweak, off)
	}
	inPlace := bytes.Clone(src)
	fast.encrypt(inPlace, inPlace, off)
	if !bytes.Equal(inPlace, want) {
		t.Fatalf("key %d bytes, sector %d: in-place ciphertext differs", len(key), sectorSize)
	}
	fast.decrypt(got, want, off)
	if !bytes.Equal(got, src) {
		t.Fatalf("key %d bytes, sector %d, tweak %d, off %d: decryption does not give the plaintext back", len(key), sectorSize, tweak, off)
	}
	fast.decrypt(inPlace, inPlace, off)
	if !bytes.Equal(inPlace, src) {
		t.Fatalf("key %d bytes, sector %d: in-place decryption differs", len(key), sectorSize)
	}
}

// TestSectorCipherKnownAnswer: IEEE 1619-2007's XTS-AES-128 vector 4
// (the first sector of its 512-byte test data, sequence number 0) on the
// path the CPU takes and on the reference path.
func TestSectorCipherKnownAnswer(t *testing.T) {
	key := []byte{
		0x27, 0x18, 0x28, 0x18, 0x28, 0x45, 0x90, 0x45, 0x23, 0x53, 0x60, 0x28, 0x74, 0x71, 0x35, 0x26,
		0x31, 0x41, 0x59, 0x26, 0x53, 0x58, 0x97, 0x93, 0x23, 0x84, 0x62, 0x64, 0x33, 0x83, 0x27, 0x95,
	}
	pt := make([]byte, 512)
	for i := range pt {
		pt[i] = byte(i)
	}
	// the first and last 16 bytes of the vector's ciphertext
	head := []byte{0x27, 0xa7, 0x47, 0x9b, 0xef, 0xa1, 0xd4, 0x76, 0x48, 0x9f, 0x30, 0x8c, 0xd4, 0xcf, 0xa6, 0xe2}
	tail := []byte{0x0a, 0x28, 0x2d, 0xf9, 0x20, 0x14, 0x7b, 0xea, 0xbe, 0x42, 0x1e, 0xe5, 0x31, 0x9d, 0x05, 0x68}
	for _, fast := range []bool{false, haveAESNI()} {
		c, err := newSectorCipherPath(key, 512, 0, fast)
		if err != nil {
			t.Fatal(err)
		}
		ct := make([]byte, 512)
		c.encrypt(ct, pt, 0)
		if !bytes.Equal(ct[:16], head) || !bytes.Equal(ct[496:], tail) {
			t.Errorf("fast %v: ciphertext %x…%x, want %x…%x", fast, ct[:16], ct[496:], head, tail)
		}
	}
}

// FuzzSectorCipherMatchesReference holds the AES-NI path to x/crypto/xts
// on whatever keys, tweaks and data the fuzzer finds.
func FuzzSectorCipherMatchesReference(f *testing.F) {
	if !assemblyPath(f) {
		return
	}
	f.Add(make([]byte, 64), uint64(0), uint32(0), false, make([]byte, 512))
	f.Add(bytes.Repeat([]byte{0xff}, 32), ^uint64(0), uint32(7), true, bytes.Repeat([]byte{0xa5}, 4096))
	f.Fuzz(func(t *testing.T, key []byte, tweak uint64, sector uint32, big bool, data []byte) {
		if len(key) != 32 && len(key) != 64 {
			return
		}
		sectorSize := 512
		if big {
			sectorSize = 4096
		}
		data = data[:len(data)/sectorSize*sectorSize]
		if len(data) == 0 {
			return
		}
		checkAgainstReference(t, key, sectorSize, tweak, int64(sector)*int64(sectorSize), data)
	})
}

// assemblyPath says whether this CPU takes the AES-NI path, whose tests
// then run; on one without the AES instructions (where they would fault)
// it checks instead that the cipher takes x/crypto/xts.
func assemblyPath(t testing.TB) bool {
	t.Helper()
	if haveAESNI() {
		return true
	}
	c, err := newSectorCipher(make([]byte, 64), 512, 0)
	if err != nil || c.slow == nil || c.keys != nil {
		t.Fatalf("no AES instructions, but the cipher does not take x/crypto/xts (err %v)", err)
	}
	return false
}

func fillRandom(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}
