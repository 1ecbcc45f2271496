package wyoming

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testkit"
)

// TestIdleTimeout: a connection from which no event comes for the idle
// timeout is told so and closed.
func TestIdleTimeout(t *testing.T) {
	f := serve(t, Options{IdleTimeout: 200 * time.Millisecond})
	c := dial(t, f.addr)
	c.send("describe", nil)
	c.expect("info")
	c.expectError(CodeIdle)
	c.expectClosed()
	// Half an event is no event.
	c = dial(t, f.addr)
	c.raw([]byte(`{"type":"synthesize","data_length":100}` + "\n{"))
	c.expectError(CodeIdle)
	c.expectClosed()
}

// TestSessionLimit: a connection is closed at its longest life, stream
// under way or not.
func TestSessionLimit(t *testing.T) {
	f := serve(t, Options{MaxSession: 300 * time.Millisecond})
	c := dial(t, f.addr)
	c.send("synthesize-start", nil)
	c.send("synthesize-chunk", map[string]any{"text": "Never ended"})
	c.expectError(CodeSessionLimit)
	c.expectClosed()
}

// TestMaxConns: past its most connections the server refuses new ones
// with an error event, and takes them again once one has closed.
func TestMaxConns(t *testing.T) {
	f := serve(t, Options{MaxConns: 1})
	c1 := dial(t, f.addr)
	c1.send("describe", nil)
	c1.expect("info")
	c2 := dial(t, f.addr)
	c2.expectError(CodeTooManyConnections)
	c2.expectClosed()
	c1.send("ping", nil)
	c1.expect("pong")
	if got := gather(t, f.reg, "omnistage_wyoming_connections_refused_total"); got != 1 {
		t.Errorf("refused %v, want 1", got)
	}
	c1.conn.Close()
	testkit.Eventually(t, "the closed connection to be let go", func() bool {
		return gather(t, f.reg, "omnistage_wyoming_connections") == 0
	})
	c3 := dial(t, f.addr)
	c3.send("describe", nil)
	c3.expect("info")
}

// TestSlowReader: a client that stops reading pushes back into the
// pipeline: the talker is held at what the bounded buffers take, far less
// than the synthesis's audio, until the write timeout cuts the client off
// and the request is aborted and released.
func TestSlowReader(t *testing.T) {
	f := serve(t, Options{WriteTimeout: 300 * time.Millisecond})
	c := dial(t, f.addr)
	c.send("synthesize", map[string]any{"text": "big one."})
	testkit.Eventually(t, "the talker's job to end", func() bool { return f.hooks.ended.Load() == 1 })
	if err := f.hooks.jobErr(); !errors.Is(err, context.Canceled) {
		t.Errorf("the talker ended with %v, want it cancelled", err)
	}
	if sent := f.hooks.sent.Load(); sent >= bigChunks {
		t.Errorf("the talker sent %d chunks to a client that read none: all of them", sent)
	} else {
		t.Logf("the talker sent %d of %d one-second chunks before the client was cut off", sent, bigChunks)
	}
	testkit.Eventually(t, "the request to be released", func() bool { return f.inFlight(t) == 0 })
	// What the server wrote before it gave up, then the end.
	_ = c.conn.SetReadDeadline(time.Now().Add(clientTimeout))
	if _, err := io.Copy(io.Discard, c.conn); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the connection stayed open")
		}
	}
}

// TestShutdown: a stop closes the connections between syntheses at once,
// lets a synthesis and a stream under way end, then closes theirs, and
// Run returns.
func TestShutdown(t *testing.T) {
	f := serve(t, Options{})
	idle := dial(t, f.addr)
	idle.send("describe", nil)
	idle.expect("info")
	busy := dial(t, f.addr)
	busy.send("synthesize", map[string]any{"text": "wait. Done."})
	<-f.hooks.waiting
	streaming := dial(t, f.addr)
	streaming.send("synthesize-start", nil)
	streaming.send("synthesize-chunk", map[string]any{"text": "One"})
	streaming.send("ping", nil)
	streaming.expect("pong") // the stream is open

	stopped := make(chan error, 1)
	go func() { stopped <- f.stop() }()
	idle.expectError(CodeShuttingDown)
	idle.expectClosed()
	if _, err := net.DialTimeout("tcp", f.addr, time.Second); err == nil {
		t.Error("the server still takes connections")
	}

	streaming.send("synthesize-chunk", map[string]any{"text": ". Two."})
	streaming.send("synthesize-stop", nil)
	if a := streaming.readAudio("synthesize-stopped"); !slices.EqualFunc(a.streams, spoken("One. Two.", 1), slices.Equal) {
		t.Errorf("the stream under way: %v", a.streams)
	}
	streaming.expectError(CodeShuttingDown)
	streaming.expectClosed()

	f.hooks.release()
	if a := busy.readAudio("audio-stop"); !slices.Equal(a.joined(), slices.Concat(spoken("wait. Done.", 1)...)) {
		t.Errorf("the synthesis under way: %v", a.joined())
	}
	busy.expectError(CodeShuttingDown)
	busy.expectClosed()
	if err := <-stopped; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestShutdownTimeout: a synthesis that outlasts the shutdown timeout is
// aborted and its connection closed.
func TestShutdownTimeout(t *testing.T) {
	f := serve(t, Options{ShutdownTimeout: 300 * time.Millisecond})
	c := dial(t, f.addr)
	c.send("synthesize", map[string]any{"text": "wait."})
	<-f.hooks.waiting
	if err := f.stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	c.expectClosed()
	testkit.Eventually(t, "the talker's job to end", func() bool { return f.hooks.ended.Load() == 1 })
	if err := f.hooks.jobErr(); !errors.Is(err, context.Canceled) {
		t.Errorf("the talker ended with %v, want it cancelled", err)
	}
	testkit.Eventually(t, "the request to be released", func() bool { return f.inFlight(t) == 0 })
}
