package sessions

// The share of a pipeline's admission slots that live input may hold.

import (
	"fmt"
	"math"
	"sync"
)

// DefaultLiveShare is the share of a pipeline's admission slots
// (deploy.max_inflight) that its live requests may hold at once: half,
// which leaves requests whose text is whole (HTTP, a Wyoming synthesize)
// the other half, however many live clients hold theirs open.
const DefaultLiveShare = 0.5

// Share bounds the live requests of each pipeline: requests whose text
// arrives while they run (a WebSocket utterance, a Wyoming stream), which
// hold an admission slot for as long as their client keeps the text
// coming. Each pipeline's live requests may hold at most the share of its
// slots, and at least one. One Share serves every server of a process
// (the HTTP API's WebSocket and Wyoming), so that together they keep to
// it. It is safe for concurrent use.
type Share struct {
	frac float64

	mu   sync.Mutex
	held map[any]int // by pipeline
}

// NewShare returns a Share of frac, which must be in (0, 1].
func NewShare(frac float64) (*Share, error) {
	if !(frac > 0 && frac <= 1) {
		return nil, fmt.Errorf("the share of live input is %g: want more than 0 and at most 1", frac)
	}
	return &Share{frac: frac, held: map[any]int{}}, nil
}

// Cap returns how many of slots a pipeline's live requests may hold.
func (s *Share) Cap(slots int) int {
	return max(1, int(math.Floor(s.frac*float64(slots)+1e-9)))
}

// Take takes one of the share of pipeline's slots (it has slots in all);
// release gives it back, once. It returns false, and takes nothing, when
// the pipeline's live requests hold their whole share.
func (s *Share) Take(pipeline any, slots int) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[pipeline] >= s.Cap(slots) {
		return nil, false
	}
	s.held[pipeline]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.held[pipeline]--; s.held[pipeline] == 0 {
				delete(s.held, pipeline)
			}
		})
	}, true
}
