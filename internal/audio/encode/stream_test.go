package encode

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/audio"
)

// writeSeconds writes the samples of [from, to) seconds of in, in 100 ms
// Writes.
func writeSeconds(t *testing.T, e Encoder, in []int16, rate int, from, to float64) {
	t.Helper()
	s := in[int(from*float64(rate)):int(to*float64(rate))]
	for len(s) > 0 {
		n := min(rate/10, len(s))
		if err := e.Write(s[:n]); err != nil {
			t.Fatalf("Write: %v", err)
		}
		s = s[n:]
	}
}

// waitGrowth returns the bytes at rec once there are more than n, calling
// e.Write(nil) to pass on what the encoder has ready (ffmpeg works on its
// own), or fails after a deadline.
func waitGrowth(t *testing.T, e Encoder, rec *recorder, n int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := e.Write(nil); err != nil {
			t.Fatalf("Write(nil): %v", err)
		}
		if got := rec.Len(); got > n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d bytes at w after 10 s", rec.Len())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStreaming checks that encoded audio reaches w while the stream is
// written, not only at Close: after the first second, and again after the
// second (so more than a header).
func TestStreaming(t *testing.T) {
	const rate = 16000
	in := testSignal(rate)
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			if format == AAC {
				needTool(t, "ffmpeg")
			}
			rec := &recorder{}
			e, err := New(format, rec, rate, Options{Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			writeSeconds(t, e, in, rate, 0, 1)
			n1 := waitGrowth(t, e, rec, 0)
			writeSeconds(t, e, in, rate, 1, 2)
			n2 := waitGrowth(t, e, rec, n1)
			writeSeconds(t, e, in, rate, 2, testSeconds)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("bytes at w: %d after 1 s, %d after 2 s, %d after Close", n1, n2, rec.Len())
		})
	}
}

func TestNewErrors(t *testing.T) {
	var w bytes.Buffer
	for _, c := range []struct {
		name, format string
		rate         int
		opts         Options
	}{
		{"unknown format", "ogg", 16000, Options{}},
		{"upper case", "MP3", 16000, Options{}},
		{"rate 0", WAV, 0, Options{}},
		{"rate too low", MP3, audio.MinRate - 1, Options{}},
		{"rate too high", Opus, audio.MaxRate + 1, Options{}},
		{"mp3 bitrate too low", MP3, 16000, Options{Bitrate: 1000}},
		{"opus bitrate too high", Opus, 16000, Options{Bitrate: 1 << 20}},
		{"aac bitrate negative", AAC, 16000, Options{Bitrate: -1}},
		{"negative length", FLAC, 16000, Options{TotalSamples: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := New(c.format, &w, c.rate, c.opts)
			if !errors.Is(err, ErrUnsupported) {
				if e != nil {
					e.Close()
				}
				t.Fatalf("New = %v, want ErrUnsupported", err)
			}
			t.Log(err)
		})
	}
	if w.Len() != 0 {
		t.Errorf("%d bytes written", w.Len())
	}
}

// TestNoFFmpeg checks that aac without ffmpeg is ErrUnavailable, and
// says why.
func TestNoFFmpeg(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New(AAC, &bytes.Buffer{}, 16000, Options{})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "ffmpeg") {
		t.Fatalf("New(aac) without ffmpeg = %v, want ErrUnavailable naming ffmpeg", err)
	}
	for _, f := range Formats() {
		if f == AAC {
			continue
		}
		e, err := New(f, &bytes.Buffer{}, 16000, Options{})
		if err != nil {
			t.Fatalf("New(%s) without ffmpeg: %v", f, err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("%s: Close: %v", f, err)
		}
	}
}

// TestFFmpegFails runs a fake ffmpeg that fails at once: Write or Close
// returns its exit status and error output, and the process is reaped.
func TestFFmpegFails(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho 'no aac for you' >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, "ffmpeg"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	e, err := New(AAC, &bytes.Buffer{}, 16000, Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := testSignal(16000)
	var werr error
	for s := in; len(s) > 0 && werr == nil; s = s[min(1600, len(s)):] {
		werr = e.Write(s[:min(1600, len(s))])
	}
	cerr := e.Close()
	if cerr == nil || (werr != nil && cerr != werr) {
		t.Fatalf("Write = %v, Close = %v; want Close to fail, with Write's error if it failed", werr, cerr)
	}
	if !strings.Contains(cerr.Error(), "no aac for you") && !strings.Contains(cerr.Error(), "exit status 3") {
		t.Errorf("error %q quotes neither ffmpeg's output nor its exit status", cerr)
	}
	if cmd := e.(*aacEncoder).cmd; cmd != nil {
		t.Errorf("ffmpeg not reaped")
	}
}

// TestWriterFails checks that every encoder returns w's error, from Write
// or Close, then keeps returning it, and frees its resources (goleak checks
// ffmpeg's goroutines at the end).
func TestWriterFails(t *testing.T) {
	const rate = 16000
	in := testSignal(rate)
	for _, format := range Formats() {
		for _, failAt := range []int{1, 3} {
			t.Run(format+"/write"+strconv.Itoa(failAt), func(t *testing.T) {
				t.Parallel()
				if format == AAC {
					needTool(t, "ffmpeg")
				}
				rec := &recorder{failAt: failAt}
				e, err := New(format, rec, rate, Options{})
				if err != nil {
					t.Fatal(err)
				}
				var werr error
				for s := in; len(s) > 0 && werr == nil; s = s[min(1600, len(s)):] {
					werr = e.Write(s[:min(1600, len(s))])
				}
				cerr := e.Close()
				err = werr
				if err == nil {
					err = cerr
				}
				if !errors.Is(err, errRecorder) {
					t.Fatalf("Write = %v, Close = %v; want the writer's error", werr, cerr)
				}
				if werr != nil && cerr != werr {
					t.Errorf("Close after a failed Write = %v, want %v", cerr, werr)
				}
				if err := e.Write(in[:10]); err == nil {
					t.Error("Write after failure succeeded")
				}
				if again := e.Close(); again != cerr {
					t.Errorf("second Close = %v, want %v", again, cerr)
				}
			})
		}
	}
}

func TestWriteAfterClose(t *testing.T) {
	for _, format := range Formats() {
		if format == AAC {
			needTool(t, "ffmpeg")
		}
		e, err := New(format, &bytes.Buffer{}, 16000, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatalf("%s: Close: %v", format, err)
		}
		if err := e.Write([]int16{1, 2, 3}); !errors.Is(err, errClosed) {
			t.Errorf("%s: Write after Close = %v, want %v", format, err, errClosed)
		}
		if err := e.Close(); err != nil {
			t.Errorf("%s: second Close = %v", format, err)
		}
	}
}

// TestEmpty checks that a stream closed without samples is a valid file of
// no audio, for the decoders that accept one.
func TestEmpty(t *testing.T) {
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			if format == AAC {
				needTool(t, "ffmpeg")
			}
			data := encodeAll(t, format, 16000, nil, Options{Stream: true})
			t.Logf("%d bytes", len(data))
			switch format {
			case WAV, FLAC, Opus:
				if got := decoders[format][0].decode(t, data, 16000); len(got) != 0 {
					t.Errorf("%d samples decoded, want none", len(got))
				}
			}
		})
	}
}

// TestTotalSamples checks the known-length headers of wav and flac, and
// that a stream of another length fails.
func TestTotalSamples(t *testing.T) {
	const rate = 16000
	in := testSignal(rate)
	n := int64(len(in))
	for _, format := range []string{WAV, FLAC} {
		t.Run(format, func(t *testing.T) {
			data := encodeAll(t, format, rate, in, Options{TotalSamples: n})
			var stated int64
			switch format {
			case WAV:
				stated = int64(leUint32(data[40:])) / 2
			case FLAC:
				// STREAMINFO: after "fLaC" and a 4-byte block header, 36
				// bits into the block's bytes 13 to 17.
				b := data[8+13 : 8+18]
				stated = int64(b[0]&0x0f)<<32 | int64(b[1])<<24 | int64(b[2])<<16 | int64(b[3])<<8 | int64(b[4])
			}
			if stated != n {
				t.Errorf("header states %d samples, want %d", stated, n)
			}
			if got := decoders[format][0].decode(t, data, rate); !slices.Equal(got, in) {
				t.Errorf("decoded %d samples, not the %d written", len(got), n)
			}
			// Too many: the Write that exceeds fails.
			e, err := New(format, &bytes.Buffer{}, rate, Options{TotalSamples: n - 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Write(in); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Write of %d samples of %d announced = %v, want ErrUnsupported", n, n-1, err)
			}
			e.Close()
			// Too few: Close fails.
			e, err = New(format, &bytes.Buffer{}, rate, Options{TotalSamples: n + 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Write(in); err != nil {
				t.Fatal(err)
			}
			if err := e.Close(); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Close after %d samples of %d announced = %v, want ErrUnsupported", n, n+1, err)
			}
		})
	}
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
