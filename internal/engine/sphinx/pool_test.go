package sphinx

import (
	"context"
	"testing"
)

// TestPoolRecycles checks that the pool frees a broken decoder, or one
// whose dictionary grew too much, and creates a fresh one in its place.
func TestPoolRecycles(t *testing.T) {
	p := newPool(1, DefaultModel, DefaultDict)
	defer p.close()
	ctx := context.Background()
	for _, spoil := range []func(d *decoder){
		func(d *decoder) { d.broken = true },
		func(d *decoder) { d.added = maxAdded + 1 },
	} {
		d, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		spoil(d)
		p.put(d)
		if d.ps != nil {
			t.Error("put kept a spoiled decoder")
		}
		d2, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d2 == d || d2.ps == nil {
			t.Error("get did not create a fresh decoder")
		}
		p.put(d2)
	}
}
