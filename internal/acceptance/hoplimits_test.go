package acceptance

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/payload"
)

// TestSlowSendersFreeTheStage is issue 22's attack on a stage server: any
// client gets a valid stream for stage 1 from stage 0 by sending it text,
// then posts it to stage 1 a byte at a time from two connections, which
// take both of the vocoder's slots. Each is cut within a window of its
// frame's first byte (408 body_timeout in its answer's error frame), and
// an honest `omnistage run` through the same servers is served.
func TestSlowSendersFreeTheStage(t *testing.T) {
	s0 := serve(t, "--stage", "0")
	s1 := serve(t, "--stage", "1", "--hop-input-window", "1s")
	head, rest := stageZeroStream(t, s0.url, "Hello there. How are you today?")

	var wg sync.WaitGroup
	quit := make(chan struct{})
	answers := make(chan error, 2)
	for range 2 {
		conn := postStream(t, s1.addr)
		if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(head), head); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for _, b := range rest {
				select {
				case <-quit:
					return
				case <-time.After(200 * time.Millisecond):
				}
				if _, err := conn.Write([]byte{'1', '\r', '\n', b, '\r', '\n'}); err != nil {
					return
				}
			}
		})
		wg.Go(func() { answers <- streamEnd(conn) })
	}
	defer func() { close(quit); wg.Wait() }()
	within(t, 30*time.Second, "both of stage 1's slots held", func() bool {
		return metric(t, s1.url, "", `omnistage_stage_bindings{stage="1"}`) == 2
	})

	out := filepath.Join(t.TempDir(), "honest.wav")
	cmd := exec.Command(omnistage(t), "run", "--timeout", "2m", "--stage", s0.url, "--stage", s1.url, "-o", out, "Hello there.")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the honest run: %v:\n%s", err, b)
	}
	if a := readWAV(t, out); seconds(a) < 0.3 {
		t.Errorf("the honest run made %.2f s of audio", seconds(a))
	}
	for range 2 {
		var se *payload.StreamError
		if err := <-answers; !errors.As(err, &se) || se.Status != http.StatusRequestTimeout || se.Code != "body_timeout" {
			t.Errorf("a slow sender's answer ended with %v, want 408 body_timeout", err)
		}
	}
	within(t, 30*time.Second, "stage 1 idle", func() bool { return idle(t, s1.url, "", 1) })
}

// stageZeroStream asks stage 0's server for a streamed answer to text, as
// anyone may, and returns the hand-off stream it answers, cut after its
// header: the header's bytes and the rest.
func stageZeroStream(t *testing.T, url, text string) (head, rest []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/run", strings.NewReader(fmt.Sprintf(`{"stage_id": 0, "stage_input": {"text": %q}}`, text)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/vnd.omnistage.stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	stream, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stage 0: %d, %v", resp.StatusCode, err)
	}
	// Read through a reader of one byte at a time, the header ends where
	// its reader stopped.
	one := &oneByte{b: stream}
	if _, _, err := payload.NewCodec(nil).NewStreamReader(one).Header(nil); err != nil {
		t.Fatalf("stage 0's answer: %v", err)
	}
	return stream[:one.off], stream[one.off:]
}

type oneByte struct {
	b   []byte
	off int
}

func (r *oneByte) Read(p []byte) (int, error) {
	if r.off == len(r.b) {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.b[r.off]
	r.off++
	return 1, nil
}

// postStream opens a streamed POST /v1/run to addr whose chunked body the
// caller writes.
func postStream(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, "POST /v1/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/vnd.omnistage.stream\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// streamEnd reads the streamed answer on conn and returns how it ended:
// nil after its end frame, the *payload.StreamError of an error frame, or
// why it could not be read.
func streamEnd(conn net.Conn) error {
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	sr := payload.NewCodec(nil).NewStreamReader(resp.Body)
	if _, _, err := sr.Header(nil); err != nil {
		return err
	}
	for {
		if _, err := sr.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
