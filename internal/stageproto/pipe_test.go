package stageproto

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// TestPipe sends messages through an os.Pipe, whose ends are the poller's
// (read and written with raw system calls on Linux): one larger than the
// pipe holds, so that the writer waits for room, then the end of the
// stream.
func TestPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	big := bytes.Repeat([]byte{7}, 1<<20)
	sent := make(chan error, 1)
	go func() {
		pw := NewWriter(w)
		err := pw.Write(JobEvent{Type: TypeInputEnd, Job: 1}, nil)
		if err == nil {
			err = pw.Write(JobEvent{Type: TypeInputEnd, Job: 2}, big)
		}
		sent <- errors.Join(err, w.Close())
	}()
	pr := NewReader(r)
	for i, want := range [][]byte{nil, big} {
		var h Header
		data, err := pr.Read(&h)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if h.Job != int64(i+1) || !bytes.Equal(data, want) {
			t.Errorf("message %d: job %d, %d bytes; want job %d, %d bytes", i, h.Job, len(data), i+1, len(want))
		}
	}
	var h Header
	if _, err := pr.Read(&h); !errors.Is(err, io.EOF) {
		t.Errorf("after the last message: %v; want io.EOF", err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}
