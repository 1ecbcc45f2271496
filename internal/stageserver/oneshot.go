package stageserver

// The one-shot form of POST /v1/run: the stage runs on its whole input,
// and the answer is one JSON object, a hand-off to the next stage or the
// request's selected outputs, written without copying its big part (the
// payload, the audio) through a JSON encoder.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	fastb64 "github.com/segmentio/asm/base64"

	"github.com/omnistage/omnistage/internal/api/requestid"
	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// runOneShot runs the call and answers with one JSON object: the payload
// for the next stage, or the request's selected outputs when the stage is
// its final one.
func (s *Server) runOneShot(w http.ResponseWriter, r *http.Request, c *call) error {
	st, err := s.submit(r, c)
	if err != nil {
		return err
	}
	defer st.Close()
	w.Header().Set(requestid.Header, c.env.RequestID)
	res, err := st.Collect(r.Context())
	if err != nil {
		return err
	}
	data := res[0].Chunks
	if c.stage != c.sel.Final {
		return s.writeHandOff(w, c, data)
	}
	_, spec := s.cfg.StageSpec(c.stage, 0)
	// The incoming data is the output of env.From; it travels on when the
	// request selected it.
	keep := c.env.From != c.stage && c.sel.Returns(c.env.From)
	out, err := merge(append(c.env.Carry(keep), payload.StageOutput{Stage: c.stage, Kind: spec.Output, Chunks: data}), c.sel)
	if err != nil {
		return err
	}
	return s.writeFinal(w, &hop.RunResponse{RequestID: c.env.RequestID, StageID: c.stage, Finished: true, Output: out})
}

// merge renders outs into one answer by modality, each output as every
// modality sel serves with it (a stage's regions serve text too); a later
// output of a modality replaces an earlier one.
func merge(outs []payload.StageOutput, sel *pipeline.Selection) (*apijson.Outputs, error) {
	var m apijson.Outputs
	for _, o := range outs {
		kinds := []engine.Kind{o.Kind}
		if served := sel.Modalities(o.Stage); len(served) > 0 {
			kinds = served
		}
		for _, k := range kinds {
			r, err := apijson.Render(k, o.Chunks)
			if err != nil {
				return nil, fmt.Errorf("stage %d output: %w", o.Stage, err)
			}
			if r.Audio != nil {
				m.Audio = r.Audio
			}
			if r.Timestamps != nil {
				m.Timestamps = r.Timestamps
			}
			if r.Text != "" {
				m.Text = r.Text
			}
			if r.Regions != nil {
				m.Regions = r.Regions
			}
		}
	}
	return &m, nil
}

// answers holds the buffers (*[]byte) that hand-off answers are written
// in; bigger ones are dropped so that a burst of long payloads does not
// pin memory.
var answers sync.Pool

const maxPooledAnswer = 4 << 20

// writeHandOff answers with the payload that takes data, the output of
// the call's stage, on to the request's next stage. The payload's base64
// is written straight into the answer's buffer, between the JSON around
// it: it is URL-safe base64, which JSON never escapes, and it is by far
// the largest part of the answer.
func (s *Server) writeHandOff(w http.ResponseWriter, c *call, data []engine.Chunk) error {
	env := c.env
	next, ok := c.sel.Next(c.stage)
	if !ok {
		return fmt.Errorf("hop: stage %d has no successor on the selection %v", c.stage, c.sel.Stages)
	}
	keep := env.From != c.stage && c.sel.Returns(env.From)
	buf, _ := answers.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	defer func() {
		if cap(*buf) <= maxPooledAnswer {
			answers.Put(buf)
		}
	}()
	id, _ := json.Marshal(env.RequestID)
	b := fmt.Appendf((*buf)[:0], `{"request_id":%s,"stage_id":%d,"finished":false,"stage_input":"`, id, next)
	b, err := s.codec.AppendEncode(b, env.Next(next, data, keep))
	if err != nil {
		return fmt.Errorf("hop: %w", err)
	}
	b = append(b, "\"}\n"...)
	*buf = b
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	out := httpbody.NewWriter(w, s.opts.WriteTimeout)
	defer out.Done()
	_, _ = out.Write(b)
	return nil
}

// writeFinal writes the final answer resp as JSON, as encoding/json
// writes it (and httpbody.WriteJSON: a line), but with its audio's base64
// made by the payload's SIMD encoder, part by part, straight into the
// answer's buffer: the standard library's encoder, through a JSON buffer,
// cost more than the rest of the answer.
func (s *Server) writeFinal(w http.ResponseWriter, resp *hop.RunResponse) error {
	orig := resp
	var audio []byte
	if a := resp.Output.Audio; a != nil && a.Data != nil {
		out, without := *resp.Output, *a
		audio, without.Data = a.Data, nil
		out.Audio = &without
		cp := *resp
		cp.Output = &out
		resp = &cp
	}
	js, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("hop: encoding the answer: %w", err)
	}
	js = append(js, '\n')
	head, tail := js, []byte(nil)
	enc := fastb64.StdEncoding
	n := len(js)
	if audio != nil {
		// The answer's only "data" key, whose value was left null: a
		// string's quotes would be escaped. Should another member ever
		// take the name, the answer is written as encoding/json writes it.
		key := []byte(`"data":null`)
		if bytes.Count(js, key) != 1 {
			httpbody.WriteJSON(w, http.StatusOK, orig)
			return nil
		}
		i := bytes.Index(js, key) + len(`"data":`)
		head, tail = js[:i], js[i+len("null"):]
		n += 2 + enc.EncodedLen(len(audio)) - len("null")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	out := &partWriter{w: httpbody.NewWriter(w, s.opts.WriteTimeout), part: chunks.Get().(*[chunkLen]byte)}
	defer out.done()
	if audio == nil {
		out.add(js)
		return nil
	}
	out.add(head)
	out.add([]byte(`"`))
	for len(audio) > 0 && out.err == nil {
		k := min(len(audio), (len(out.part)-len(out.b))/4*3)
		if k == 0 {
			out.flush()
			continue
		}
		m := enc.EncodedLen(k)
		enc.Encode(out.part[len(out.b):len(out.b)+m], audio[:k])
		out.b, audio = out.part[:len(out.b)+m], audio[k:]
	}
	out.add([]byte(`"`))
	out.add(tail)
	return nil
}

// partWriter gathers an answer's pieces into a buffer and writes it when
// full, so that an answer takes few writes; a piece longer than the buffer
// is written as it is. After a failed write it writes nothing more.
type partWriter struct {
	w    *httpbody.Writer
	part *[chunkLen]byte
	b    []byte // what part holds, not yet written
	err  error
}

func (p *partWriter) add(piece []byte) {
	if len(p.b)+len(piece) > len(p.part) {
		p.flush()
	}
	if len(piece) > len(p.part) {
		p.write(piece)
		return
	}
	p.b = append(p.part[:len(p.b)], piece...)
}

func (p *partWriter) flush() {
	p.write(p.b)
	p.b = p.part[:0]
}

func (p *partWriter) write(b []byte) {
	if p.err == nil && len(b) > 0 {
		_, p.err = p.w.Write(b)
	}
}

// done writes what is left and gives the buffer back.
func (p *partWriter) done() {
	p.flush()
	p.w.Done()
	chunks.Put(p.part)
}
