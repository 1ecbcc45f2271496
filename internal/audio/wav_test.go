package audio

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	goaudio "github.com/go-audio/audio"
	"github.com/go-audio/wav"

	"github.com/omnistage/omnistage/internal/engine"
)

func TestWAVHeader(t *testing.T) {
	tests := []struct {
		name    string
		rate    int
		dataLen uint32
		want    string
	}{
		{"known", 24000, 100, "52494646" + "88000000" + "57415645" + "666d7420" + "10000000" + "0100" + "0100" +
			"c05d0000" + "80bb0000" + "0200" + "1000" + "64617461" + "64000000"},
		{"unknown", 16000, UnknownSize, "52494646" + "ffffffff" + "57415645" + "666d7420" + "10000000" + "0100" + "0100" +
			"803e0000" + "007d0000" + "0200" + "1000" + "64617461" + "ffffffff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WAVHeader(tt.rate, tt.dataLen)
			if h := hex.EncodeToString(got); h != tt.want {
				t.Errorf("WAVHeader(%d, %#x) =\n%s, want\n%s", tt.rate, tt.dataLen, h, tt.want)
			}
			if len(got) != WAVHeaderLen {
				t.Errorf("len = %d, want %d", len(got), WAVHeaderLen)
			}
			prefix := []byte("xy")
			if a := AppendWAVHeader(prefix, tt.rate, tt.dataLen); !bytes.Equal(a, append([]byte("xy"), got...)) {
				t.Error("AppendWAVHeader differs from WAVHeader after the prefix")
			}
		})
	}
}

// TestWriteWAVMatchesGoAudio checks WriteWAV against github.com/go-audio/wav
// both ways: the file go-audio's encoder writes is byte for byte WriteWAV's,
// and go-audio's decoder reads WriteWAV's back.
func TestWriteWAVMatchesGoAudio(t *testing.T) {
	for _, n := range []int{1, 1000, 50000} {
		a := &engine.Audio{SampleRate: 22050, Samples: speechNoise(22050, float64(n)/22050, -12, 1)}
		var ours bytes.Buffer
		if err := WriteWAV(&ours, a); err != nil {
			t.Fatal(err)
		}

		path := filepath.Join(t.TempDir(), "a.wav")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		enc := wav.NewEncoder(f, a.SampleRate, 16, 1, 1)
		data := make([]int, len(a.Samples))
		for i, s := range a.Samples {
			data[i] = int(s)
		}
		buf := &goaudio.IntBuffer{Format: &goaudio.Format{NumChannels: 1, SampleRate: a.SampleRate}, Data: data, SourceBitDepth: 16}
		if err := enc.Write(buf); err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		theirs, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours.Bytes(), theirs) {
			t.Errorf("%d samples: WriteWAV differs from go-audio's encoder at byte %d", n, firstByteDiff(ours.Bytes(), theirs))
		}
		if appended, err := AppendWAV([]byte("x"), a); err != nil || !bytes.Equal(appended[1:], theirs) || appended[0] != 'x' {
			t.Errorf("%d samples: AppendWAV differs from go-audio's encoder (%v)", n, err)
		}

		dec := wav.NewDecoder(bytes.NewReader(ours.Bytes()))
		pcm, err := dec.FullPCMBuffer()
		if err != nil {
			t.Fatal(err)
		}
		if dec.SampleRate != 22050 || dec.NumChans != 1 || dec.BitDepth != 16 || dec.WavAudioFormat != 1 {
			t.Errorf("go-audio reads rate %d, %d channels, %d bits, format %d", dec.SampleRate, dec.NumChans, dec.BitDepth, dec.WavAudioFormat)
		}
		if !slices.Equal(pcm.Data, data) {
			t.Errorf("%d samples: go-audio decodes other samples", n)
		}
	}
}

func firstByteDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestWAVRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 8192, 8193, 100000} {
		a := &engine.Audio{SampleRate: 16000, Samples: speechNoise(16000, float64(n)/16000, -12, 2)}
		var b bytes.Buffer
		if err := WriteWAV(&b, a); err != nil {
			t.Fatal(err)
		}
		if b.Len() != WAVHeaderLen+2*n {
			t.Errorf("%d samples: %d bytes, want %d", n, b.Len(), WAVHeaderLen+2*n)
		}
		got, err := ReadWAV(&b)
		if err != nil {
			t.Fatalf("%d samples: %v", n, err)
		}
		if got.SampleRate != a.SampleRate || !slices.Equal(got.Samples, a.Samples) {
			t.Errorf("%d samples: read back %d Hz, %d samples, not what was written", n, got.SampleRate, len(got.Samples))
		}
	}
}

// TestReadWAVStream reads what a streaming response sends: a header of
// unknown length, then the samples as they come.
func TestReadWAVStream(t *testing.T) {
	x := speechNoise(24000, 1, -12, 3)
	stream := WAVHeader(24000, UnknownSize)
	for in := x; len(in) > 0; in = in[min(1234, len(in)):] {
		stream = AppendPCMBytes(stream, in[:min(1234, len(in))])
	}
	for _, tail := range [][]byte{nil, {0x7f}} { // a cut inside the last sample
		got, err := ReadWAV(bytes.NewReader(append(slices.Clone(stream), tail...)))
		if err != nil {
			t.Fatal(err)
		}
		if got.SampleRate != 24000 || !slices.Equal(got.Samples, x) {
			t.Errorf("tail %x: read %d Hz, %d samples, want 24000 Hz, %d samples", tail, got.SampleRate, len(got.Samples), len(x))
		}
	}
}

// wavFile builds a WAV file from chunks given as id and body; the RIFF size
// is filled in.
func wavFile(chunks ...string) []byte {
	b := []byte("RIFF\x00\x00\x00\x00WAVE")
	for i := 0; i < len(chunks); i += 2 {
		b = append(b, chunks[i]...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(chunks[i+1])))
		b = append(b, chunks[i+1]...)
		if len(chunks[i+1])%2 == 1 {
			b = append(b, 0)
		}
	}
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8))
	return b
}

// fmtBody is a fmt chunk body.
func fmtBody(format, channels uint16, rate uint32, bits uint16) string {
	le := binary.LittleEndian
	b := le.AppendUint16(nil, format)
	b = le.AppendUint16(b, channels)
	b = le.AppendUint32(b, rate)
	b = le.AppendUint32(b, rate*uint32(channels*bits/8))
	b = le.AppendUint16(b, channels*bits/8)
	b = le.AppendUint16(b, bits)
	return string(b)
}

func TestReadWAVChunks(t *testing.T) {
	pcm := string(PCMBytes([]int16{1, -2, 3}))
	extensible := fmtBody(0xFFFE, 1, 8000, 16) + "\x16\x00" + "\x10\x00" + "\x04\x00\x00\x00" +
		"\x01\x00\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71" // KSDATAFORMAT_SUBTYPE_PCM
	tests := []struct {
		name string
		file []byte
	}{
		{"plain", wavFile("fmt ", fmtBody(1, 1, 8000, 16), "data", pcm)},
		{"chunks around", wavFile("LIST", "INFOISFT\x03\x00\x00\x00ab\x00", "fmt ", fmtBody(1, 1, 8000, 16), "fact", "\x03\x00\x00\x00", "data", pcm, "LIST", "x")},
		{"odd chunk padded", wavFile("fmt ", fmtBody(1, 1, 8000, 16), "junk", "abc", "data", pcm)},
		{"fmt with extra bytes", wavFile("fmt ", fmtBody(1, 1, 8000, 16)+"\x00\x00", "data", pcm)},
		{"extensible PCM", wavFile("fmt ", extensible, "data", pcm)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadWAV(bytes.NewReader(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got.SampleRate != 8000 || !slices.Equal(got.Samples, []int16{1, -2, 3}) {
				t.Errorf("read %d Hz %v", got.SampleRate, got.Samples)
			}
		})
	}
}

func TestReadWAVErrors(t *testing.T) {
	pcm := string(PCMBytes([]int16{1, 2}))
	good := fmtBody(1, 1, 8000, 16)
	truncated := wavFile("fmt ", good, "data", pcm)
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "wav: reading header: EOF"},
		{"not riff", []byte("RIFX\x00\x00\x00\x00WAVE"), "not a RIFF WAVE file"},
		{"not wave", []byte("RIFF\x00\x00\x00\x00AVI "), "not a RIFF WAVE file"},
		{"float", wavFile("fmt ", fmtBody(3, 1, 8000, 32), "data", pcm), "format 0x3, want PCM"},
		{"stereo", wavFile("fmt ", fmtBody(1, 2, 8000, 16), "data", pcm), "2 channels, want mono"},
		{"8-bit", wavFile("fmt ", fmtBody(1, 1, 8000, 8), "data", pcm), "8-bit samples, want 16-bit"},
		{"rate 0", wavFile("fmt ", fmtBody(1, 1, 0, 16), "data", pcm), "sample rate 0 Hz"},
		{"short fmt", wavFile("fmt ", good[:14], "data", pcm), "fmt chunk of 14 bytes"},
		{"data first", wavFile("data", pcm, "fmt ", good), "data chunk before fmt chunk"},
		{"no data", wavFile("fmt ", good), "no data chunk"},
		{"odd data", wavFile("fmt ", good, "data", "abc"), "odd length 3"},
		{"truncated data", truncated[:len(truncated)-1], "data chunk truncated at 3 of 4 bytes"},
		// A LIST chunk that claims 4 GiB: an error, not a 4 GiB allocation.
		{"huge chunk", []byte("RIFF\x00\x01\x00\x00WAVELIST\xf0\xff\xff\xffINFO"), `"LIST" chunk truncated at 4 of 4294967280 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			_, err := ReadWAV(bytes.NewReader(tt.file))
			runtime.ReadMemStats(&m1)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadWAV = %v, want an error containing %q", err, tt.want)
			}
			if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 1<<20 {
				t.Errorf("ReadWAV allocated %d bytes for a %d-byte file", alloc, len(tt.file))
			}
		})
	}
}

type failWriter struct{}

var errDiskFull = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestWriteWAVErrors(t *testing.T) {
	tests := []struct {
		name string
		w    io.Writer
		a    *engine.Audio
		want string
	}{
		{"nil audio", io.Discard, nil, "wav: nil audio"},
		{"rate 0", io.Discard, &engine.Audio{}, "wav: sample rate 0 Hz"},
		{"write fails", failWriter{}, &engine.Audio{SampleRate: 8000, Samples: []int16{1}}, "wav: disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteWAV(tt.w, tt.a)
			if err == nil || err.Error() != tt.want {
				t.Errorf("WriteWAV = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := AppendWAV(nil, &engine.Audio{}); err == nil || err.Error() != "wav: sample rate 0 Hz" {
		t.Errorf("AppendWAV of a rate 0 = %v", err)
	}
	if err := WriteWAV(failWriter{}, &engine.Audio{SampleRate: 8000}); !errors.Is(err, errDiskFull) {
		t.Errorf("WriteWAV error %v does not wrap the writer's", err)
	}
}

func FuzzReadWAV(f *testing.F) {
	var b bytes.Buffer
	WriteWAV(&b, &engine.Audio{SampleRate: 16000, Samples: []int16{1, 2, 3, -4}})
	f.Add(b.Bytes())
	f.Add(append(WAVHeader(8000, UnknownSize), 1, 2, 3))
	f.Add(wavFile("LIST", "INFOISFT\x03\x00\x00\x00ab\x00", "fmt ", fmtBody(1, 1, 8000, 16), "data", "abcd"))
	f.Fuzz(func(t *testing.T, file []byte) {
		a, err := ReadWAV(bytes.NewReader(file))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteWAV(&out, a); err != nil {
			t.Fatal(err)
		}
		back, err := ReadWAV(&out)
		if err != nil || back.SampleRate != a.SampleRate || !slices.Equal(back.Samples, a.Samples) {
			t.Fatalf("re-encoded file reads back differently: %v", err)
		}
	})
}

func BenchmarkWriteWAV(b *testing.B) {
	a := &engine.Audio{SampleRate: 24000, Samples: speechNoise(24000, 10, -18, 1)}
	b.ReportAllocs()
	b.SetBytes(int64(2 * len(a.Samples)))
	for b.Loop() {
		if err := WriteWAV(io.Discard, a); err != nil {
			b.Fatal(err)
		}
	}
}
