package luks

import (
	"context"
	"testing"
)

// BenchmarkSectorCipher is the data path's encryption alone: 1 MiB of
// 4096-byte sectors, as a LUKS2 image's writes and reads pay it.
func BenchmarkSectorCipher(b *testing.B) {
	c, err := newSectorCipher(make([]byte, 64), 4096, 0)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.Run("encrypt", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for i := 0; i < b.N; i++ {
			c.encrypt(buf, buf, int64(i)<<20)
		}
	})
	b.Run("decrypt", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for i := 0; i < b.N; i++ {
			c.decrypt(buf, buf, int64(i)<<20)
		}
	})
}

// BenchmarkImageWrite is a LUKS2 image's whole write path for 1 MiB
// writes of whole sectors over a device in memory: the ciphertext's
// buffer, the encryption and the device's copy.
func BenchmarkImageWrite(b *testing.B) {
	ctx := context.Background()
	o := fastKDF(2)
	o.Alignment = 1 << 20
	dev := &memDevice{b: make([]byte, 34<<20)}
	if _, err := FormatImage(ctx, dev, []byte("pw"), o); err != nil {
		b.Fatal(err)
	}
	img, err := Open(ctx, dev, []byte("pw"), 2)
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 1<<20)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := img.WriteAtContext(ctx, p, int64(i%16)<<20); err != nil {
			b.Fatal(err)
		}
	}
}
