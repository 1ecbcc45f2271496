package payload

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"runtime"
	"testing"
)

// TestMAC checks the digest-list MAC against the construction of the
// package documentation, written out independently (digestListMAC), for
// bodies around the block size and with one and several goroutines.
func TestMAC(t *testing.T) {
	m := newMacer(testKey)
	big := make([]byte, 5*macBlock+3)
	for i := range big {
		big[i] = byte(i * 7)
	}
	head := []byte("OSTG\x02\x01")
	for _, procs := range []int{1, 4} {
		old := runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 100, macBlock - 1, macBlock, macBlock + 1, 2 * macBlock, len(big)} {
			got := m.sum([]byte("prefix"), head, big[:n])
			want := append([]byte("prefix"), digestListMAC(testKey, head, big[:n])...)
			if !bytes.Equal(got, want) {
				t.Errorf("GOMAXPROCS %d, body of %d bytes: tag %x, want %x", procs, n, got, want)
			}
			if !m.verify(want[len("prefix"):], head, big[:n]) {
				t.Errorf("GOMAXPROCS %d, body of %d bytes: verify refuses its tag", procs, n)
			}
		}
		runtime.GOMAXPROCS(old)
	}
	// With an empty body the MAC is the plain HMAC of the head, the
	// stream's t_pre.
	plain := hmac.New(sha256.New, testKey)
	plain.Write(head)
	if !bytes.Equal(m.sum(nil, head, nil), plain.Sum(nil)) {
		t.Error("MAC of an empty body is not HMAC-SHA256 of the head")
	}
	// The blocks are cut at fixed offsets: moving a byte across a block
	// boundary changes the tag.
	a := m.sum(nil, head, big[:macBlock+1])
	b := m.sum(nil, head, big[1:macBlock+2])
	if bytes.Equal(a, b) {
		t.Error("different bodies have the same tag")
	}
}
