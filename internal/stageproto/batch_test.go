package stageproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestBatchRoundTrip writes a batch message of jobs with chunks of
// several kinds and reads it back as a program does: each job's fields,
// and its chunk from its share of the data.
func TestBatchRoundTrip(t *testing.T) {
	chunks := []engine.Chunk{tensorsChunk(), {Text: &engine.Text{Text: "Hi."}}, regionsChunk(), {Words: &engine.Words{Words: []engine.Word{{Word: "Hi"}}}}}
	var entries []BatchEntry
	for i, c := range chunks {
		h, data, err := EncodeChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewBatchEntry(BatchJob{Job: int64(10 + i), RequestID: "r", StageID: 1, Params: json.RawMessage(`{"k":1}`), Prompt: "p", ChunkHeader: h}, data)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	var b bytes.Buffer
	if err := NewWriter(&b).WriteBatch(4, entries); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), `{"type":"batch","window":4,"jobs":[{"job":10,"request_id":"r","stage_id":1,"params":{"k":1},"prompt":"p","kind":"tensor",`) {
		t.Errorf("wire: %.200q", b.String())
	}
	var h Header
	data, err := NewReader(&b).Read(&h)
	if err != nil {
		t.Fatal(err)
	}
	if h.Type != TypeBatch || h.Window != 4 || len(h.Jobs) != len(chunks) {
		t.Fatalf("read %+v", h)
	}
	parts, err := SplitBatchData(h.Jobs, data)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range h.Jobs {
		c, err := DecodeChunk(&j.ChunkHeader, parts[i])
		if err != nil {
			t.Fatalf("job %d: %v", j.Job, err)
		}
		if j.Job != int64(10+i) || j.Prompt != "p" || string(j.Params) != `{"k":1}` || !reflect.DeepEqual(c, chunks[i]) {
			t.Errorf("job %d: %+v, chunk %+v; want %+v", i, j, c, chunks[i])
		}
	}
}

// TestPackBatches cuts entries into messages by the program's most jobs
// and the framing's limits.
func TestPackBatches(t *testing.T) {
	entry := func(header, data int) BatchEntry {
		return BatchEntry{JSON: make([]byte, header), Data: make([]byte, data)}
	}
	sizes := func(bs [][]BatchEntry) []int {
		var n []int
		for _, b := range bs {
			n = append(n, len(b))
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		entries []BatchEntry
		most    int
		want    []int
	}{
		{"none", nil, 4, nil},
		{"by count", []BatchEntry{entry(100, 10), entry(100, 10), entry(100, 10), entry(100, 10), entry(100, 10)}, 2, []int{2, 2, 1}},
		{"by header", []BatchEntry{entry(30000, 0), entry(30000, 0), entry(30000, 0)}, 8, []int{2, 1}},
		{"by data", []BatchEntry{entry(100, 6<<20), entry(100, 6<<20), entry(100, 6<<20)}, 8, []int{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sizes(PackBatches(tc.entries, tc.most)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("batches of %v; want %v", got, tc.want)
			}
		})
	}
	if _, err := NewBatchEntry(BatchJob{Job: 1, Prompt: strings.Repeat("x", MaxHeader)}, nil); err == nil {
		t.Error("a job whose prompt does not fit a header: no error")
	}
}

func TestSplitBatchDataRefuses(t *testing.T) {
	for _, tc := range []struct {
		lengths []int
		data    int
		want    string
	}{
		{[]int{4, 4}, 7, "job 2 announces 4 bytes of data, of 3 left"},
		{[]int{4, 2}, 7, "the jobs announce 6 bytes of data, but the message has 7"},
		{[]int{-1}, 0, "announces -1 bytes"},
	} {
		jobs := make([]BatchJob, len(tc.lengths))
		for i, n := range tc.lengths {
			jobs[i] = BatchJob{Job: int64(i + 1), DataLength: n}
		}
		_, err := SplitBatchData(jobs, make([]byte, tc.data))
		var pe *ProtocolError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.lengths, err, tc.want)
		}
	}
}
