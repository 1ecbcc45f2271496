package external

// Benchmarks of a chunk's way through a stage program: the latency of one
// round trip (one chunk in flight) against an in-process echo, and the
// throughput of a stream of large chunks.

import (
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/testkit"
)

// chanSource yields the chunks sent on it until it is closed.
type chanSource chan engine.Chunk

func (s chanSource) Recv(ctx context.Context) (engine.Chunk, error) {
	select {
	case c, ok := <-s:
		if !ok {
			return engine.Chunk{}, io.EOF
		}
		return c, nil
	case <-ctx.Done():
		return engine.Chunk{}, ctx.Err()
	}
}

// chanSink sends the chunks it takes on.
type chanSink chan engine.Chunk

func (s chanSink) Send(ctx context.Context, c engine.Chunk) error {
	select {
	case s <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// repeatSource yields one chunk n times.
type repeatSource struct {
	c engine.Chunk
	n int
}

func (s *repeatSource) Recv(context.Context) (engine.Chunk, error) {
	if s.n == 0 {
		return engine.Chunk{}, io.EOF
	}
	s.n--
	return s.c, nil
}

// countSink counts the bytes of audio it takes.
type countSink struct{ bytes int }

func (s *countSink) Send(_ context.Context, c engine.Chunk) error {
	s.bytes += 2 * len(c.Audio.Samples)
	return nil
}

// benchEngine starts and warms a replica on audio with opts, closed when
// tb ends (start and build take a *testing.T).
func benchEngine(tb testing.TB, opts engine.Options) *Engine {
	tb.Helper()
	stderr := &testkit.SyncBuffer{}
	spec := engine.Spec{StageID: 1, Name: "echo", Input: engine.KindAudio, Output: engine.KindAudio, Options: opts}
	e, err := New(spec, Config{Stderr: stderr})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = e.Close()
		if tb.Failed() {
			tb.Logf("the program's stderr:\n%s", stderr)
		}
	})
	if err := e.Warm(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return e
}

// goPeer returns the options of a replica whose program is this test
// binary's echo stage, in Go (stageprog.Serve).
func goPeer(testing.TB) engine.Options {
	return engine.Options{"command": []any{os.Args[0], "-test.run=^$"}, "env": map[string]any{testStageEnv: "echo"}}
}

// roundTrips times n round trips of c through one job of e, one chunk in
// flight.
func roundTrips(tb testing.TB, e engine.Engine, c engine.Chunk, n int) []time.Duration {
	tb.Helper()
	in, out := make(chanSource), make(chanSink)
	done := make(chan error, 1)
	go func() {
		done <- e.Process(context.Background(), &engine.Job{RequestID: "bench", StageID: 1, In: in, Out: out})
	}()
	d := make([]time.Duration, n)
	for i := range d {
		t0 := time.Now()
		in <- c
		select {
		case <-out:
		case err := <-done:
			tb.Fatalf("the job ended after %d round trips: %v", i, err)
		}
		d[i] = time.Since(t0)
	}
	close(in)
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
	return d
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// quantile returns the q-quantile of d.
func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// pipeTrips times n round trips of size bytes through a child process
// that copies its standard input to its standard output: what any program
// of a stage costs, without the protocol.
func pipeTrips(tb testing.TB, size, n int) []time.Duration {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{testStageEnv + "=bytes"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	buf := make([]byte, size)
	d := make([]time.Duration, n)
	for i := range d {
		t0 := time.Now()
		if _, err := stdin.Write(buf); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.ReadFull(stdout, buf); err != nil {
			tb.Fatal(err)
		}
		d[i] = time.Since(t0)
	}
	return d
}

// BenchmarkChunk is the round trip of 100 ms of 16 kHz audio (3 200
// bytes) through an echo stage, one chunk in flight: in process, through
// a Go program and through a Python one (the SDK). added-µs is the
// median's excess over the in-process echo's; x-pipe its ratio to the
// median round trip of as many bytes through a child process that copies
// them, without the protocol ("pipe": the floor of any program, measured
// in the same run).
func BenchmarkChunk(b *testing.B) {
	c := audio(16000, make([]int16, 1600)...)
	const wire = 3200 + 70 // the data and an input or output header
	base := median(roundTrips(b, testengine.Echo{}, c, 10000))
	floor := median(pipeTrips(b, wire, 2000))
	for _, peer := range []struct {
		name string
		new  func(testing.TB) engine.Engine
	}{
		{"inproc", func(testing.TB) engine.Engine { return testengine.Echo{} }},
		{"pipe", nil},
		{"go", func(tb testing.TB) engine.Engine { return benchEngine(tb, goPeer(tb)) }},
		{"python", func(tb testing.TB) engine.Engine { return benchEngine(tb, pythonOptions(tb, "echo.py")) }},
	} {
		b.Run(peer.name, func(b *testing.B) {
			if peer.new == nil {
				b.ReportAllocs()
				b.ResetTimer()
				d := pipeTrips(b, wire, b.N)
				b.StopTimer()
				b.ReportMetric(micros(median(d)), "median-µs")
				b.ReportMetric(float64(median(d))/float64(floor), "x-pipe")
				return
			}
			e := peer.new(b)
			roundTrips(b, e, c, 200) // the program's first chunks: caches, code paths
			b.ReportAllocs()
			b.ResetTimer()
			d := roundTrips(b, e, c, b.N)
			b.StopTimer()
			m := median(d)
			b.ReportMetric(micros(m), "median-µs")
			b.ReportMetric(micros(m-base), "added-µs")
			b.ReportMetric(float64(m)/float64(floor), "x-pipe")
		})
	}
}

// BenchmarkThroughput streams large chunks of audio through an echo
// stage, as many in flight as the credit allows: MB/s of audio each way.
func BenchmarkThroughput(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}} {
		c := audio(16000, make([]int16, size.bytes/2)...)
		for _, peer := range []struct {
			name string
			opts func(testing.TB) engine.Options
		}{
			{"go", goPeer},
			{"python", func(tb testing.TB) engine.Options { return pythonOptions(tb, "echo.py") }},
		} {
			b.Run(peer.name+"/"+size.name, func(b *testing.B) {
				e := benchEngine(b, peer.opts(b))
				b.SetBytes(int64(size.bytes))
				b.ReportAllocs()
				b.ResetTimer()
				sink := &countSink{}
				if err := e.Process(context.Background(), &engine.Job{RequestID: "bench", StageID: 1, In: &repeatSource{c: c, n: b.N}, Out: sink}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if sink.bytes != b.N*size.bytes {
					b.Fatalf("%d bytes back; want %d", sink.bytes, b.N*size.bytes)
				}
			})
		}
	}
}

// firstOutputs times n jobs of e, each from its start to its first output
// (one chunk in, echoed), then to its end.
func firstOutputs(tb testing.TB, e engine.Engine, c engine.Chunk, n int) (first, whole []time.Duration) {
	tb.Helper()
	first, whole = make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		in, out := make(chanSource, 1), make(chanSink)
		done := make(chan error, 1)
		t0 := time.Now()
		go func() {
			done <- e.Process(context.Background(), &engine.Job{RequestID: "bench", StageID: 1, In: in, Out: out})
		}()
		in <- c
		select {
		case <-out:
		case err := <-done:
			tb.Fatalf("job %d ended before its output: %v", i, err)
		}
		first[i] = time.Since(t0)
		close(in)
		if err := <-done; err != nil {
			tb.Fatal(err)
		}
		whole[i] = time.Since(t0)
	}
	return first, whole
}

// BenchmarkJob is a job of one chunk (100 ms of 16 kHz audio) through an
// echo stage, one job at a time: what a request costs beyond its chunks.
// first-µs is the median time from the job's start to its output, end-µs
// to its end.
func BenchmarkJob(b *testing.B) {
	c := audio(16000, make([]int16, 1600)...)
	for _, peer := range []struct {
		name string
		new  func(testing.TB) engine.Engine
	}{
		{"inproc", func(testing.TB) engine.Engine { return testengine.Echo{} }},
		{"go", func(tb testing.TB) engine.Engine { return benchEngine(tb, goPeer(tb)) }},
		{"python", func(tb testing.TB) engine.Engine { return benchEngine(tb, pythonOptions(tb, "echo.py")) }},
	} {
		b.Run(peer.name, func(b *testing.B) {
			e := peer.new(b)
			firstOutputs(b, e, c, 20)
			b.ReportAllocs()
			b.ResetTimer()
			first, whole := firstOutputs(b, e, c, b.N)
			b.StopTimer()
			b.ReportMetric(micros(median(first)), "first-µs")
			b.ReportMetric(micros(median(whole)), "end-µs")
			b.ReportMetric(micros(quantile(first, 0.9)), "first-p90-µs")
		})
	}
}
