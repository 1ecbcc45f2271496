package stageproto

// Batch messages: several jobs, each with its one input chunk, in one
// message, for a program whose hello offers batches.

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/omnistage/omnistage/internal/engine"
)

// BatchEntry is one job of a batch message, encoded: its entry in the
// header's jobs, and its input chunk's data.
type BatchEntry struct {
	JSON []byte
	Data []byte
}

// batchOverhead bounds what a batch message's header holds beyond its
// entries and the commas between them: its type, window, the brackets of
// jobs, data_length and the line feed.
const batchOverhead = 96

// NewBatchEntry encodes job j, whose input chunk's fields j holds, and
// data, the chunk's data. A job that cannot fit a message alone (a long
// prompt, or params) is an *engine.InputError.
func NewBatchEntry(j BatchJob, data []byte) (BatchEntry, error) {
	j.DataLength = len(data)
	b, err := json.Marshal(j)
	if err != nil {
		return BatchEntry{}, fmt.Errorf("stage protocol: %w", err)
	}
	if len(b) > MaxHeader-batchOverhead {
		return BatchEntry{}, &engine.InputError{Reason: fmt.Sprintf("a job of %d bytes of fields (its text, params and chunk's description); a stage program takes at most %d KiB", len(b), MaxHeader>>10)}
	}
	return BatchEntry{JSON: b, Data: data}, nil
}

// PackBatches cuts entries, in order, into the batch messages that carry
// them: each of at most most jobs, its header and data within the
// framing's limits.
func PackBatches(entries []BatchEntry, most int) [][]BatchEntry {
	var out [][]BatchEntry
	start, header, data := 0, batchOverhead, 0
	for i, e := range entries {
		h, d := len(e.JSON)+1, len(e.Data)
		if i > start && (i-start >= most || header+h > MaxHeader || data+d > MaxData) {
			out = append(out, entries[start:i:i])
			start, header, data = i, batchOverhead, 0
		}
		header, data = header+h, data+d
	}
	if start < len(entries) {
		out = append(out, entries[start:])
	}
	return out
}

// WriteBatch writes a batch message of entries, each job with an output
// window of window chunks.
func (w *Writer) WriteBatch(window int, entries []BatchEntry) error {
	n := len(`{"type":"batch","window":,"jobs":[]}`) + 20
	for _, e := range entries {
		n += len(e.JSON) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"type":"batch","window":`...)
	b = strconv.AppendInt(b, int64(window), 10)
	b = append(b, `,"jobs":[`...)
	data := make([][]byte, 0, len(entries))
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.JSON...)
		if len(e.Data) > 0 {
			data = append(data, e.Data)
		}
	}
	b = append(b, "]}"...)
	return w.WriteRaw(b, data...)
}

// SplitBatchData returns the data of each of a batch message's jobs: data
// cut by their data_length, in order. Lengths that are negative or do not
// add up to data's are a *ProtocolError.
func SplitBatchData(jobs []BatchJob, data []byte) ([][]byte, error) {
	out := make([][]byte, len(jobs))
	at := 0
	for i, j := range jobs {
		if j.DataLength < 0 || j.DataLength > len(data)-at {
			return nil, protocolErrorf("batch: job %d announces %d bytes of data, of %d left", j.Job, j.DataLength, len(data)-at)
		}
		if j.DataLength > 0 {
			out[i] = data[at : at+j.DataLength : at+j.DataLength]
		}
		at += j.DataLength
	}
	if at != len(data) {
		return nil, protocolErrorf("batch: the jobs announce %d bytes of data, but the message has %d", at, len(data))
	}
	return out, nil
}
