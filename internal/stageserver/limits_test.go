package stageserver_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/loadgen"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/stageserver"
	"github.com/omnistage/omnistage/internal/testkit"
)

// window is the input window of these tests: short, so that a test that
// waits for a hop to be cut waits little.
const window = 200 * time.Millisecond

// wantStreamError checks that an answer's stream ended with an error frame
// of status and code.
func wantStreamError(t *testing.T, err error, status int, code string) {
	t.Helper()
	var se *payload.StreamError
	if !errors.As(err, &se) || se.Status != status || se.Code != code {
		t.Fatalf("the answer ended with %v, want an error frame %d %s", err, status, code)
	}
	if strings.Contains(se.Message, "127.0.0.1") {
		t.Errorf("the message names a socket address: %s", se.Message)
	}
}

// wantFailure checks that a hop's answer is a failure of status and code:
// a plain error answer, when the hop failed before it was bound, or else
// the error frame that ends its stream.
func wantFailure(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		got, msg := errorAnswer(t, resp)
		if resp.StatusCode != status || got != code || strings.Contains(msg, "127.0.0.1") {
			t.Fatalf("%d %s: %s, want %d %s", resp.StatusCode, got, msg, status, code)
		}
		return
	}
	_, err := readAnswer(resp)
	wantStreamError(t, err, status, code)
}

// trickle sends b one byte every interval until b is sent, the hop fails
// or stop closes; wait waits for it to return.
func trickle(h *rawHop, b []byte, interval time.Duration) (stop func()) {
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := range b {
			select {
			case <-quit:
				return
			case <-time.After(interval):
			}
			if h.send(b[i:i+1]) != nil {
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// TestHopInputRate: a caller that trickles the bytes of a frame is cut
// within a window of the frame's first byte, with a 408 body_timeout, and
// the replica it held goes to an honest hop that waited for it. An honest
// caller that pauses between whole frames for longer than the window is
// not cut, nor one whose frames wait in the server while its stage is
// busy for several windows (only the time the server waits in reads
// counts).
func TestHopInputRate(t *testing.T) {
	cfg := testkit.Parse(t, boundPipeline)
	opts := api.Options{HopLimits: stageserver.Limits{InputWindow: window}}

	t.Run("trickle", func(t *testing.T) {
		s := stageOne(t, cfg, nil, opts)
		stream := newHandOff(t, cfg, strings.Repeat("x", 4096))
		h := dialHop(t, s.URL)
		if err := h.send(stream.head); err != nil {
			t.Fatal(err)
		}
		resp := h.answer(t) // once bound: the trickle holds the only slot
		stop := trickle(h, stream.frames[0], window/4)
		defer stop()
		bound(t, s)
		// An honest hop waits for the slot.
		honest := newHandOff(t, cfg, "honest")
		hh := dialHop(t, s.URL)
		if err := hh.send(honest.whole()); err != nil {
			t.Fatal(err)
		}
		if err := hh.end(); err != nil {
			t.Fatal(err)
		}
		_, err := readAnswer(resp)
		wantStreamError(t, err, http.StatusRequestTimeout, "body_timeout")
		got, err := readAnswer(hh.answer(t))
		if err != nil || strings.Join(got, " ") != "honest|b.0" {
			t.Fatalf("the honest hop: %q, %v", got, err)
		}
		unbound(t, s)
	})

	t.Run("pauses between frames", func(t *testing.T) {
		s := stageOne(t, cfg, nil, opts)
		stream := newHandOff(t, cfg, "one", "two", "three")
		h := dialHop(t, s.URL)
		if err := h.send(stream.head); err != nil {
			t.Fatal(err)
		}
		resp := h.answer(t)
		for _, f := range stream.frames {
			// A pause of three windows before each whole frame: the
			// talker making its next sentence.
			time.Sleep(3 * window)
			if err := h.send(f); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.send(stream.end); err != nil {
			t.Fatal(err)
		}
		if err := h.end(); err != nil {
			t.Fatal(err)
		}
		got, err := readAnswer(resp)
		if err != nil || strings.Join(got, " ") != "one|b.0 two|b.0 three|b.0" {
			t.Fatalf("%q, %v", got, err)
		}
		unbound(t, s)
	})

	t.Run("busy stage", func(t *testing.T) {
		// Stage 1 takes five windows over its first chunk, while the rest
		// of the input waits in the server, some frame cut in two by the
		// read buffer.
		hooks := &testengine.Hooks{Chunk: func(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
			if n == 0 {
				select {
				case <-time.After(5 * window):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}}
		s := stageOne(t, cfg, hooks, opts)
		texts := make([]string, 24)
		for i := range texts {
			texts[i] = strings.Repeat("y", 5000)
		}
		stream := newHandOff(t, cfg, texts...)
		h := dialHop(t, s.URL)
		if err := h.send(stream.whole()); err != nil {
			t.Fatal(err)
		}
		if err := h.end(); err != nil {
			t.Fatal(err)
		}
		got, err := readAnswer(h.answer(t))
		if err != nil || len(got) != len(texts) {
			t.Fatalf("%d chunks, %v", len(got), err)
		}
		unbound(t, s)
	})
}

// TestHopMaxDuration: a hop that outlasts Limits.MaxDuration ends, its
// replica freed: with a 408 body_timeout while its input still comes (whole
// frames, each in time), with a 504 timeout once its input has ended and
// the stage is what takes long.
func TestHopMaxDuration(t *testing.T) {
	cfg := testkit.Parse(t, boundPipeline)
	opts := api.Options{HopLimits: stageserver.Limits{MaxDuration: 3 * window}}

	t.Run("input still coming", func(t *testing.T) {
		s := stageOne(t, cfg, nil, opts)
		frames := make([]string, 1000)
		for i := range frames {
			frames[i] = "again"
		}
		stream := newHandOff(t, cfg, frames...)
		h := dialHop(t, s.URL)
		if err := h.send(stream.head); err != nil {
			t.Fatal(err)
		}
		resp := h.answer(t)
		var wg sync.WaitGroup
		quit := make(chan struct{})
		wg.Go(func() {
			for _, f := range stream.frames {
				select {
				case <-quit:
					return
				case <-time.After(window / 2):
				}
				if h.send(f) != nil {
					return
				}
			}
		})
		defer func() { close(quit); wg.Wait() }()
		_, err := readAnswer(resp)
		wantStreamError(t, err, http.StatusRequestTimeout, "body_timeout")
		unbound(t, s)
	})

	t.Run("stage too slow", func(t *testing.T) {
		hooks := &testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			<-ctx.Done()
			return ctx.Err()
		}}
		s := stageOne(t, cfg, hooks, opts)
		h := dialHop(t, s.URL)
		if err := h.send(newHandOff(t, cfg, "slow").whole()); err != nil {
			t.Fatal(err)
		}
		if err := h.end(); err != nil {
			t.Fatal(err)
		}
		_, err := readAnswer(h.answer(t))
		wantStreamError(t, err, http.StatusGatewayTimeout, "timeout")
		unbound(t, s)
	})
}

// TestHopStreamFaults: what a caller does wrong with a stream is a 4xx
// without socket addresses, never a 5xx: a stream that stalls before its
// header is a 408 body_timeout, one whose body ends cleanly before its end
// frame a 400 payload_truncated (before its header, or in the answer's
// error frame after it), a body of malformed chunks a 400 bad_request, and
// one whose connection breaks off a 499.
func TestHopStreamFaults(t *testing.T) {
	cfg := testkit.Parse(t, boundPipeline)
	s := stageOne(t, cfg, nil, api.Options{HopLimits: stageserver.Limits{InputWindow: window}})
	stream := newHandOff(t, cfg, "one")

	for _, tc := range []struct {
		name   string
		send   []byte
		end    bool
		status int
		code   string
	}{
		{"stall before the header", stream.head[:10], false, http.StatusRequestTimeout, "body_timeout"},
		{"nothing sent", nil, false, http.StatusRequestTimeout, "body_timeout"},
		{"ends in the header", stream.head[:10], true, http.StatusBadRequest, "payload_truncated"},
		{"malformed chunks", nil, false, http.StatusBadRequest, "bad_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := dialHop(t, s.URL)
			if tc.code == "bad_request" {
				if _, err := h.conn.Write([]byte("zz\r\n")); err != nil {
					t.Fatal(err)
				}
			}
			if len(tc.send) > 0 {
				if err := h.send(tc.send); err != nil {
					t.Fatal(err)
				}
			}
			if tc.end {
				if err := h.end(); err != nil {
					t.Fatal(err)
				}
			}
			resp := h.answer(t)
			code, msg := errorAnswer(t, resp)
			if resp.StatusCode != tc.status || code != tc.code || strings.Contains(msg, "127.0.0.1") {
				t.Fatalf("%d %s: %s", resp.StatusCode, code, msg)
			}
		})
	}

	t.Run("ends before the end frame", func(t *testing.T) {
		h := dialHop(t, s.URL)
		if err := h.send(append(stream.head, stream.frames[0]...)); err != nil {
			t.Fatal(err)
		}
		if err := h.end(); err != nil {
			t.Fatal(err)
		}
		wantFailure(t, h.answer(t), http.StatusBadRequest, "payload_truncated")
		unbound(t, s)
	})

	t.Run("broken off", func(t *testing.T) {
		h := dialHop(t, s.URL)
		if err := h.send(stream.head[:10]); err != nil {
			t.Fatal(err)
		}
		h.conn.Close()
		testkit.Eventually(t, "the broken-off call answered 499", func() bool {
			return runAnswers(t, s.URL)["499"] > 0
		})
		for code, n := range runAnswers(t, s.URL) {
			if code[0] == '5' {
				t.Errorf("%d answers %s", n, code)
			}
		}
	})
}

// runAnswers returns the server's count of /v1/run answers by status,
// from /metrics.
func runAnswers(t *testing.T, base string) map[string]int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, m := range families["omnistage_http_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["route"] == "run" {
			counts[labels["code"]] += int(m.GetCounter().GetValue())
		}
	}
	return counts
}

// TestHopCallerGone: a caller that closes its connection, or resets it,
// while its stage takes nothing of its input (the input read ahead is
// full, so the server reads nothing) frees the stage: the stage server's
// bindings, read from its /metrics, come back to 0.
func TestHopCallerGone(t *testing.T) {
	cfg := testkit.Parse(t, boundPipeline)
	hooks := &testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		<-ctx.Done() // takes no input until the hop ends
		return ctx.Err()
	}}
	s := stageOne(t, cfg, hooks, api.Options{})
	texts := make([]string, 20)
	for i := range texts {
		texts[i] = strings.Repeat("z", 3000)
	}
	stream := newHandOff(t, cfg, texts...)
	for _, tc := range []struct {
		name  string
		reset bool
	}{{"closed", false}, {"reset", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := dialHop(t, s.URL)
			// More frames than the stage's input holds, the server's read
			// buffer included; the body does not end.
			if err := h.send(append(stream.head, bytesOf(stream.frames)...)); err != nil {
				t.Fatal(err)
			}
			resp := h.answer(t)
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if tc.reset {
				_ = h.conn.(*net.TCPConn).SetLinger(0)
			}
			h.conn.Close()
			testkit.Eventually(t, "no binding nor request held, by /metrics", func() bool {
				l := metricsLeaks(t, s.URL)
				return l.Bindings == 0 && l.InFlight == 0
			})
		})
	}
}

func bytesOf(frames [][]byte) []byte {
	var b []byte
	for _, f := range frames {
		b = append(b, f...)
	}
	return b
}

// metricsLeaks reads the requests in flight and bindings of the server
// at base from its /metrics.
func metricsLeaks(t *testing.T, base string) loadgen.Leaks {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	l, err := loadgen.ParseMetrics(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
