package bufpool

import "testing"

// TestPool checks the size classes and that a buffer handed back is one
// Get can return again at its class's size, while buffers Get did not
// make are dropped.
func TestPool(t *testing.T) {
	for _, c := range []struct{ n, capacity int }{
		{1, 4 << 10}, {4 << 10, 4 << 10}, {64<<10 + 1, 128 << 10}, {300 << 10, 512 << 10}, {32 << 20, 32 << 20},
		{32<<20 + 1, 32<<20 + 1},
	} {
		var p Pool
		b := p.Get(c.n)
		if len(*b) != c.n || cap(*b) != c.capacity {
			t.Errorf("Get(%d): len %d cap %d, want cap %d", c.n, len(*b), cap(*b), c.capacity)
		}
		*b = (*b)[:1]
		p.Put(b)
		if again := p.Get(c.capacity); cap(*again) != c.capacity {
			t.Errorf("Get(%d) after a Put: cap %d", c.capacity, cap(*again))
		}
	}
	var p Pool
	odd := make([]byte, 100<<10) // not a class size: dropped
	p.Put(&odd)
	p.Put(nil)
	for c := range p.classes {
		if b := p.classes[c].Get(); b != nil {
			t.Errorf("class %d kept a buffer Get never gave", c)
		}
	}
}
