package loadgen

// Playback: whether a stream kept ahead of a listener playing it as it
// came.

import "time"

// playback follows a stream as a player with no buffer of its own would
// play it: from its first audio on, in real time. A chunk that comes
// after the audio before it has run out is an underrun: the listener
// hears silence from when the audio ran out until the chunk came (a
// stall), and playback goes on from there.
type playback struct {
	dry       time.Time // when the audio received so far runs out
	underruns int
	stall     time.Duration
}

// add notes n samples at rate received at now.
func (p *playback) add(now time.Time, n, rate int) {
	if rate <= 0 || n <= 0 {
		return
	}
	switch {
	case p.dry.IsZero():
		p.dry = now
	case now.After(p.dry):
		p.underruns++
		p.stall += now.Sub(p.dry)
		p.dry = now
	}
	p.dry = p.dry.Add(time.Duration(n) * time.Second / time.Duration(rate))
}
