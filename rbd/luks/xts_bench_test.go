package luks

import "testing"

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
