package wyoming

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/sessions"
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

// TestMaxConns: past its most connections, a new connection takes the
// place of the one waiting for an event the longest (a silent socket
// first), once it has for the grace: that one is told so and closed; one
// in a synthesis keeps its place, and while every connection is in one,
// or none has waited for the grace, a new one is refused with an error
// event.
func TestMaxConns(t *testing.T) {
	f := serve(t, Options{MaxConns: 2})
	silent := dial(t, f.addr) // never sends a thing
	testkit.Eventually(t, "the silent connection to be counted", func() bool {
		return gather(t, f.reg, "omnistage_wyoming_connections") == 1
	})
	streaming := dial(t, f.addr)
	streaming.send("synthesize-start", nil)
	streaming.send("synthesize-chunk", map[string]any{"text": "Still here. "})
	// Nobody has waited for the grace yet.
	c := dial(t, f.addr)
	c.expectError(CodeTooManyConnections)
	c.expectClosed()
	// The silent one goes, the streaming one stays.
	dialIn(t, f.addr)
	silent.expectError(CodeTooManyConnections)
	silent.expectClosed()
	streaming.send("synthesize-stop", nil)
	if a := streaming.readAudio("synthesize-stopped"); len(a.streams) != 1 {
		t.Errorf("the stream in progress: %d audio streams", len(a.streams))
	}
	if got := gather(t, f.reg, "omnistage_wyoming_connections_evicted_total"); got != 1 {
		t.Errorf("evicted %v, want 1", got)
	}
	if got := gather(t, f.reg, "omnistage_wyoming_connections_refused_total"); got < 1 {
		t.Errorf("refused %v, want at least 1", got)
	}
}

// dialIn dials addr until a connection is taken (one refused with
// too_many_connections is tried again), and returns it.
func dialIn(t *testing.T, addr string) *client {
	t.Helper()
	deadline := time.Now().Add(clientTimeout)
	for {
		c := dial(t, addr)
		c.send("describe", nil)
		ev := c.next()
		switch {
		case ev.Type == "info":
			return c
		case ev.Type != "error" || ev.Data["code"] != CodeTooManyConnections || time.Now().After(deadline):
			t.Fatalf("a new connection: %s %v", ev.Type, ev.Data)
		}
		c.conn.Close()
		time.Sleep(50 * time.Millisecond)
	}
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

// TestStreamLimit: a stream that takes text for longer than its bound
// without synthesize-stop fails with stream_limit, which closes the
// connection, though its pieces keep coming within the idle timeout.
func TestStreamLimit(t *testing.T) {
	f := serve(t, Options{MaxStream: 300 * time.Millisecond})
	c := dial(t, f.addr)
	c.send("synthesize-start", nil)
	deadline := time.Now().Add(clientTimeout)
	for {
		c.send("synthesize-chunk", map[string]any{"text": "a"})
		_ = c.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.br.Peek(1); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stream was not ended")
		}
	}
	c.expectError(CodeStreamLimit)
	c.expectClosed()
}

// TestStreamShare: streams hold at most their share of a pipeline's
// admission slots: past it a stream fails with overloaded, while a
// whole synthesize, and a stream of another pipeline, are spoken.
func TestStreamShare(t *testing.T) {
	share, err := sessions.NewShare(0.01) // one stream of each pipeline at once
	if err != nil {
		t.Fatal(err)
	}
	f := serve(t, Options{LiveShare: share})
	held := dial(t, f.addr)
	held.send("synthesize-start", nil)
	held.send("synthesize-chunk", map[string]any{"text": "wait. "})
	<-f.hooks.waiting // its request runs
	c := dial(t, f.addr)
	c.send("synthesize-start", nil)
	c.send("synthesize-chunk", map[string]any{"text": "One too many. "})
	if ev := c.expectError("overloaded"); !strings.Contains(ev.Data["text"].(string), "streams hold their share") {
		t.Errorf("error %v", ev.Data)
	}
	c.expectClosed()
	whole := dial(t, f.addr)
	whole.send("synthesize", map[string]any{"text": "Whole text."})
	whole.readAudio("audio-stop")
	f.hooks.release()
	held.send("synthesize-stop", nil)
	held.readAudio("synthesize-stopped")
	again := dial(t, f.addr)
	again.send("synthesize-start", nil)
	again.send("synthesize-chunk", map[string]any{"text": "Room again."})
	again.send("synthesize-stop", nil)
	again.readAudio("synthesize-stopped")
}

// TestPeers: a connection from a network the server does not serve gets
// forbidden_peer and is closed; from one it serves, it is served.
func TestPeers(t *testing.T) {
	for _, tc := range []struct {
		peers  string
		served bool
	}{{"10.0.0.0/8", false}, {"127.0.0.0/8", true}, {"::1/128,127.0.0.1/32", true}} {
		t.Run(tc.peers, func(t *testing.T) {
			var peers []netip.Prefix
			for _, p := range strings.Split(tc.peers, ",") {
				peers = append(peers, netip.MustParsePrefix(p))
			}
			f := serve(t, Options{Peers: peers})
			c := dial(t, f.addr)
			c.send("describe", nil)
			if !tc.served {
				c.expectError(CodeForbiddenPeer)
				c.expectClosed()
				if got := gather(t, f.reg, "omnistage_wyoming_connections_forbidden_total"); got != 1 {
					t.Errorf("forbidden %v, want 1", got)
				}
				return
			}
			c.expect("info")
		})
	}
}
