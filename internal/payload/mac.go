package payload

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"runtime"
	"sync"
	"sync/atomic"
)

const (
	// tagLen is the length of every tag: an HMAC-SHA256.
	tagLen = sha256.Size
	// macBlock is the size of the body blocks whose SHA-256 digests a tag
	// covers (the last block may be shorter).
	macBlock = 64 << 10
)

// macer computes the tags of one key. It is safe for concurrent use.
type macer struct {
	pool sync.Pool // of hash.Hash: HMAC-SHA256 with the key
}

func newMacer(key []byte) *macer {
	return &macer{pool: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// sum appends to dst the tag of head and body, the digest-list MAC of the
// package documentation: HMAC-SHA256(key, head || SHA-256(block 0) || ...
// || SHA-256(block k-1)), where the blocks are body cut into macBlock
// bytes (none when body is empty). Every tag of the package, of payloads
// and of stream frames, is made here.
func (m *macer) sum(dst, head, body []byte) []byte {
	h := m.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(head)
	if len(body) > macBlock {
		h.Write(blockDigests(body))
	} else if len(body) > 0 {
		d := sha256.Sum256(body)
		h.Write(d[:])
	}
	dst = h.Sum(dst)
	m.pool.Put(h)
	return dst
}

// verify reports whether tag is the tag of head and body, in constant time.
func (m *macer) verify(tag, head, body []byte) bool {
	var sum [tagLen]byte
	return hmac.Equal(m.sum(sum[:0], head, body), tag)
}

// blockDigests returns the SHA-256 digests of the macBlock-sized blocks of
// body, in order, computed on up to GOMAXPROCS goroutines (the caller's
// among them), each taking the next block not yet taken until none is
// left.
func blockDigests(body []byte) []byte {
	n := (len(body) + macBlock - 1) / macBlock
	digests := make([]byte, n*sha256.Size)
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			d := sha256.Sum256(body[i*macBlock : min((i+1)*macBlock, len(body))])
			copy(digests[i*sha256.Size:], d[:])
		}
	}
	var wg sync.WaitGroup
	for range min(n, runtime.GOMAXPROCS(0)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return digests
}
