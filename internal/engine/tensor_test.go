package engine

import (
	"slices"
	"testing"
)

// TestFloat32Tensor checks that a float32 tensor's elements come back as
// they went in, whether its data is aligned for a view or not.
func TestFloat32Tensor(t *testing.T) {
	v := []float32{1.5, -2, 0, 3e-7}
	tn := Float32Tensor("x", []int64{2, 2}, v)
	if err := tn.Check(); err != nil {
		t.Fatal(err)
	}
	got, err := tn.Float32s()
	if err != nil || !slices.Equal(got, v) {
		t.Fatalf("Float32s = %v, %v; want %v", got, err, v)
	}
	// Data one byte into a buffer is misaligned: the elements are copied.
	buf := make([]byte, 1+len(tn.Data))
	copy(buf[1:], tn.Data)
	moved := Tensor{Name: "y", Type: Float32, Shape: []int64{4}, Data: buf[1:]}
	if got, err := moved.Float32s(); err != nil || !slices.Equal(got, v) {
		t.Fatalf("misaligned Float32s = %v, %v; want %v", got, err, v)
	}
	empty := Float32Tensor("e", []int64{0}, nil)
	if got, err := empty.Float32s(); err != nil || got == nil || len(got) != 0 || empty.Data == nil {
		t.Fatalf("empty: data %v, Float32s %v, %v", empty.Data, got, err)
	}
	for _, bad := range []Tensor{{Name: "i", Type: Int16, Data: make([]byte, 4)}, {Name: "odd", Type: Float32, Data: make([]byte, 6)}} {
		if _, err := bad.Float32s(); err == nil {
			t.Errorf("%s: Float32s succeeded", bad.Name)
		}
	}
}
