package stageserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testkit"
)

// boundPipeline is two text stages, stage 1 with one replica slot and a
// short input window: one hop holds stage 1, and a few frames fill its
// input.
const boundPipeline = `
pipeline:
  name: bound
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text}
    - {id: 1, name: b, engine: test-b, input: text, output: text, final_output: true}
deploy:
  abort_timeout: 5s
  stream_buffer: 2
  stages:
    - {id: 1, max_inflight: 1, max_queue: 4}
`

const rawKey = "raw-hop-test-key-0123456789"

// stageOne runs a headless server of cfg's stage 1, signing with rawKey.
func stageOne(t *testing.T, cfg *pipeline.Config, hooks *testengine.Hooks, opts api.Options) *apitest.Server {
	t.Helper()
	stage := 1
	reg := prometheus.NewRegistry()
	opts.Stage, opts.Codec, opts.Registry = &stage, payload.NewCodec([]byte(rawKey)), reg
	return apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(hooks), Registerer: reg}, opts)
}

// handOff is a hand-off stream to stage 1 of cfg, as stage 0's server
// would send it, signed with rawKey, cut into its frames: the preamble
// with the header, one frame per text, and the end frame.
type handOff struct {
	head   []byte
	frames [][]byte
	end    []byte
}

func newHandOff(t *testing.T, cfg *pipeline.Config, texts ...string) *handOff {
	t.Helper()
	var b bytes.Buffer
	sw := payload.NewCodec([]byte(rawKey)).NewStreamWriter(&b)
	env := &payload.Envelope{Pipeline: cfg.Pipeline.Name, Digest: cfg.Digest(), TransferID: "raw", RequestID: "raw",
		From: 0, To: 1, Final: 1, Outputs: []string{"text"}, Params: make([]json.RawMessage, cfg.Route.NumIDs())}
	if err := sw.Header(payload.FrameHandOff, env); err != nil {
		t.Fatal(err)
	}
	h := &handOff{head: bytes.Clone(b.Bytes())}
	for _, text := range texts {
		b.Reset()
		if err := sw.Data(&engine.Chunk{Text: &engine.Text{Text: text}}); err != nil {
			t.Fatal(err)
		}
		h.frames = append(h.frames, bytes.Clone(b.Bytes()))
	}
	b.Reset()
	if err := sw.End(); err != nil {
		t.Fatal(err)
	}
	h.end = bytes.Clone(b.Bytes())
	return h
}

// whole is the whole stream.
func (h *handOff) whole() []byte {
	return bytes.Join(append(append([][]byte{h.head}, h.frames...), h.end), nil)
}

// rawHop is a streamed POST /v1/run written by hand on its own
// connection, its body chunked: a caller that sends what a test says,
// when it says.
type rawHop struct {
	conn net.Conn
	br   *bufio.Reader
}

func dialHop(t *testing.T, base string) *rawHop {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST /v1/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/vnd.omnistage.stream\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return &rawHop{conn: conn, br: bufio.NewReader(conn)}
}

// send writes b as one chunk of the body.
func (h *rawHop) send(b []byte) error {
	_, err := fmt.Fprintf(h.conn, "%x\r\n%s\r\n", len(b), b)
	return err
}

// end ends the body, cleanly.
func (h *rawHop) end() error {
	_, err := io.WriteString(h.conn, "0\r\n\r\n")
	return err
}

// answer reads the answer's status line and headers, within testkit's
// timeout.
func (h *rawHop) answer(t *testing.T) *http.Response {
	t.Helper()
	_ = h.conn.SetReadDeadline(time.Now().Add(testkit.Timeout))
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return resp
}

// readAnswer reads a streamed answer to its end and returns its chunks'
// texts and how it ended: nil after its end frame, the *payload.StreamError
// of an error frame, or why it could not be read.
func readAnswer(resp *http.Response) ([]string, error) {
	defer resp.Body.Close()
	sr := payload.NewCodec([]byte(rawKey)).NewStreamReader(resp.Body)
	if _, _, err := sr.Header(nil); err != nil {
		return nil, err
	}
	var texts []string
	for {
		c, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return texts, nil
		}
		if err != nil {
			return texts, err
		}
		texts = append(texts, c.Text.Text)
	}
}

// errorAnswer reads a JSON error answer's code and message.
func errorAnswer(t *testing.T, resp *http.Response) (code, msg string) {
	t.Helper()
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%d answer without a JSON error: %v", resp.StatusCode, err)
	}
	return body.Error.Code, body.Error.Message
}

// unbound waits until s holds no request and no binding.
func unbound(t *testing.T, s *apitest.Server) {
	t.Helper()
	hoptest.Idle(t, s.Orch)
}

// bound waits until s's stage 1 holds a binding.
func bound(t *testing.T, s *apitest.Server) {
	t.Helper()
	testkit.Eventually(t, "stage 1 bound", func() bool { return s.Orch.Stats().Bindings() > 0 })
}
