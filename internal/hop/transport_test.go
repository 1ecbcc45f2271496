package hop

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/payload"
)

// BenchmarkTransport measures the transports a streamed hop could use, on
// loopback, with the hop's own framing and signing: HTTP/1.1 with
// full-duplex bodies, and HTTP/2 without TLS (h2c). Each op sends one
// 100 ms audio frame (3200 bytes of samples) over an open call and waits
// for the server to echo it back ("pingpong": the per-chunk latency a hop
// adds), or sends 64 frames while their echoes stream back ("stream": the
// per-chunk cost of a busy hop; ns/chunk). "open" opens a call, sends one
// frame and ends it: the per-request cost.
func BenchmarkTransport(b *testing.B) {
	codec := payload.NewCodec([]byte("transport-benchmark-key-0123456789"))
	chunk := engine.Chunk{Audio: &engine.Audio{SampleRate: 16000, Samples: make([]int16, 1600)}}
	head := &payload.Envelope{
		Pipeline: "bench", Digest: [32]byte{1}, TransferID: "t", RequestID: "r", From: 0, To: 1, Final: 1,
		Params: make([]json.RawMessage, 2), Outputs: []string{"audio"},
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		sr := codec.NewStreamReader(r.Body)
		if _, _, err := sr.Header(nil); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set(HeaderStage, "1")
		w.Header().Set(HeaderFinished, "true")
		w.WriteHeader(200)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		sw := codec.NewStreamWriter(flushWriter{w, rc})
		_ = sw.Header(payload.FrameResult, &payload.Envelope{
			Pipeline: "bench", Digest: [32]byte{1}, TransferID: "t", RequestID: "r", From: 1, To: 1, Final: 1,
			Params: make([]json.RawMessage, 2), Outputs: []string{"audio"},
		})
		for {
			c, err := sr.Next()
			if errors.Is(err, io.EOF) {
				_ = sw.End()
				return
			}
			if err != nil {
				return
			}
			if sw.Data(&c) != nil {
				return
			}
		}
	})
	for _, tc := range []struct {
		name string
		h2c  bool
	}{{"http1", false}, {"h2c", true}} {
		s := httptest.NewUnstartedServer(echo)
		s.Config.Protocols = new(http.Protocols)
		s.Config.Protocols.SetHTTP1(true)
		s.Config.Protocols.SetUnencryptedHTTP2(true)
		s.Start()
		client := &Client{HTTP: &http.Client{Transport: benchTransport(tc.h2c)}}
		open := func() (*payload.StreamWriter, *io.PipeWriter, *payload.StreamReader, io.Closer) {
			pr, pw := io.Pipe()
			sw := codec.NewStreamWriter(pw)
			// The header goes as the transport reads it, before the answer
			// comes.
			wrote := make(chan error, 1)
			go func() { wrote <- sw.Header(payload.FrameHandOff, head) }()
			a, err := client.Open(context.Background(), s.URL, pr, ContentType)
			if err != nil {
				b.Fatal(err)
			}
			if err := <-wrote; err != nil {
				b.Fatal(err)
			}
			sr := codec.NewStreamReader(a.Body)
			if _, _, err := sr.Header(nil); err != nil {
				b.Fatal(err)
			}
			return sw, pw, sr, a.Body
		}
		closeCall := func(sw *payload.StreamWriter, pw *io.PipeWriter, sr *payload.StreamReader, body io.Closer) {
			_ = sw.End()
			_ = pw.Close()
			if _, err := sr.Next(); !errors.Is(err, io.EOF) {
				b.Fatalf("end: %v", err)
			}
			body.Close()
		}
		b.Run(tc.name+"/pingpong", func(b *testing.B) {
			sw, pw, sr, body := open()
			b.ReportAllocs()
			for b.Loop() {
				if err := sw.Data(&chunk); err != nil {
					b.Fatal(err)
				}
				if _, err := sr.Next(); err != nil {
					b.Fatal(err)
				}
			}
			closeCall(sw, pw, sr, body)
		})
		b.Run(tc.name+"/stream", func(b *testing.B) {
			const n = 64
			sw, pw, sr, body := open()
			b.ReportAllocs()
			for b.Loop() {
				done := make(chan error, 1)
				go func() {
					for range n {
						if err := sw.Data(&chunk); err != nil {
							done <- err
							return
						}
					}
					done <- nil
				}()
				for range n {
					if _, err := sr.Next(); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/chunk")
			closeCall(sw, pw, sr, body)
		})
		b.Run(tc.name+"/open", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sw, pw, sr, body := open()
				if err := sw.Data(&chunk); err != nil {
					b.Fatal(err)
				}
				if _, err := sr.Next(); err != nil {
					b.Fatal(err)
				}
				closeCall(sw, pw, sr, body)
			}
		})
		client.CloseIdleConnections()
		s.Close()
	}
}

// benchTransport is NewHTTPClient's transport, or one that speaks h2c
// (HTTP/2 with prior knowledge) to http:// servers.
func benchTransport(h2c bool) *http.Transport {
	t := NewHTTPClient().Transport.(*http.Transport)
	if h2c {
		t.Protocols = new(http.Protocols)
		t.Protocols.SetUnencryptedHTTP2(true)
	}
	return t
}

// flushWriter flushes after each write: one frame.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}
