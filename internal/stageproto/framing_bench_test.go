package stageproto

// BenchmarkFraming compares the protocol's framing with two others, each
// against a Python echo of its own (docs/stage-protocol.md, Framing): a
// JSON header line then raw data (the protocol's), a binary length
// prefix then a JSON header then raw data, and JSON with the data in
// base64. One message is in flight; an op is its round trip.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// The Python echoes: each reads a message, decodes its header, and writes
// the header (encoded again) and the data back.
const (
	pyJSONLine = `
import json, sys
r, w = sys.stdin.buffer, sys.stdout.buffer
while True:
    line = r.readline()
    if not line:
        break
    h = json.loads(line)
    data = r.read(h.get("data_length", 0))
    w.write(json.dumps(h, separators=(",", ":")).encode() + b"\n")
    w.write(data)
    w.flush()
`
	pyPrefix = `
import json, sys
r, w = sys.stdin.buffer, sys.stdout.buffer
while True:
    p = r.read(4)
    if not p:
        break
    h = json.loads(r.read(int.from_bytes(p, "big")))
    data = r.read(h.get("data_length", 0))
    hdr = json.dumps(h, separators=(",", ":")).encode()
    w.write(len(hdr).to_bytes(4, "big") + hdr)
    w.write(data)
    w.flush()
`
	pyBase64 = `
import base64, json, sys
r, w = sys.stdin.buffer, sys.stdout.buffer
while True:
    line = r.readline()
    if not line:
        break
    h = json.loads(line)
    data = base64.b64decode(h["data"])
    h["data"] = base64.b64encode(data).decode("ascii")
    w.write(json.dumps(h, separators=(",", ":")).encode() + b"\n")
    w.flush()
`
)

// framing is one way to frame a message, both sides: Go's here, Python's
// in script.
type framing struct {
	name   string
	script string
	// trip returns the round trip of a message of data on the pipes to and
	// from the echo: it writes the message to w and reads its echo from r.
	trip func(w io.Writer, r io.Reader) func(data []byte) error
}

// benchHeader is the header every framing carries: an input chunk's.
type benchHeader struct {
	Type       string `json:"type"`
	Job        int64  `json:"job"`
	Kind       string `json:"kind"`
	SampleRate int    `json:"sample_rate"`
	DataLength int    `json:"data_length,omitempty"`
	Data       []byte `json:"data,omitempty"` // base64, in JSON
}

var framings = []framing{
	{"json-line", pyJSONLine, jsonLineTrip},
	{"length-prefix", pyPrefix, prefixTrip},
	{"base64", pyBase64, base64Trip},
}

// jsonLineTrip is the protocol's framing, with its Writer and Reader.
func jsonLineTrip(w io.Writer, r io.Reader) func([]byte) error {
	pw, pr := NewWriter(w), NewReader(r)
	return func(data []byte) error {
		if err := pw.Write(Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "audio", SampleRate: 16000}}, data); err != nil {
			return err
		}
		var h Header
		back, err := pr.Read(&h)
		if err == nil && len(back) != len(data) {
			err = fmt.Errorf("%d bytes back; want %d", len(back), len(data))
		}
		return err
	}
}

func prefixTrip(w io.Writer, r io.Reader) func([]byte) error {
	bw, br := bufio.NewWriterSize(w, 64<<10), bufio.NewReaderSize(r, 64<<10)
	return func(data []byte) error {
		hdr, err := json.Marshal(benchHeader{Type: TypeInput, Job: 1, Kind: "audio", SampleRate: 16000, DataLength: len(data)})
		if err != nil {
			return err
		}
		_, _ = bw.Write(binary.BigEndian.AppendUint32(nil, uint32(len(hdr))))
		_, _ = bw.Write(hdr)
		_, _ = bw.Write(data)
		if err := bw.Flush(); err != nil {
			return err
		}
		var p [4]byte
		if _, err := io.ReadFull(br, p[:]); err != nil {
			return err
		}
		hdr = make([]byte, binary.BigEndian.Uint32(p[:]))
		if _, err := io.ReadFull(br, hdr); err != nil {
			return err
		}
		var h benchHeader
		if err := json.Unmarshal(hdr, &h); err != nil {
			return err
		}
		back := make([]byte, h.DataLength)
		_, err = io.ReadFull(br, back)
		return err
	}
}

func base64Trip(w io.Writer, r io.Reader) func([]byte) error {
	bw, br := bufio.NewWriterSize(w, 64<<10), bufio.NewReaderSize(r, 64<<10)
	return func(data []byte) error {
		msg, err := json.Marshal(benchHeader{Type: TypeInput, Job: 1, Kind: "audio", SampleRate: 16000, Data: data})
		if err != nil {
			return err
		}
		_, _ = bw.Write(msg)
		_ = bw.WriteByte('\n')
		if err := bw.Flush(); err != nil {
			return err
		}
		line, err := br.ReadBytes('\n')
		if err != nil {
			return err
		}
		var h benchHeader
		if err := json.Unmarshal(line, &h); err != nil {
			return err
		}
		if len(h.Data) != len(data) {
			return fmt.Errorf("%d bytes back; want %d", len(h.Data), len(data))
		}
		return nil
	}
}

func BenchmarkFraming(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 is not installed: the framing benchmark's echoes are Python")
	}
	for _, size := range []int{3200, 64 << 10} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i)
		}
		for _, f := range framings {
			b.Run(fmt.Sprintf("%s/%d", f.name, size), func(b *testing.B) {
				cmd := exec.Command("python3", "-c", f.script)
				stdin, err := cmd.StdinPipe()
				if err != nil {
					b.Fatal(err)
				}
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				defer func() {
					_ = stdin.Close()
					_ = cmd.Wait()
				}()
				trip := f.trip(stdin, stdout)
				for range 100 { // the echo's first messages
					if err := trip(data); err != nil {
						b.Fatal(err)
					}
				}
				d := make([]time.Duration, b.N)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := range d {
					t0 := time.Now()
					if err := trip(data); err != nil {
						b.Fatal(err)
					}
					d[i] = time.Since(t0)
				}
				b.StopTimer()
				slices.Sort(d)
				b.ReportMetric(float64(d[len(d)/2])/float64(time.Microsecond), "median-µs")
			})
		}
	}
}
