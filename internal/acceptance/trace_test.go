package acceptance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/telemetry/telemetrytest"
)

// exportTo makes the processes the test starts export their spans to a
// stand-in collector, through the standard variables, without delay.
func exportTo(t *testing.T) *telemetrytest.Collector {
	t.Helper()
	col := telemetrytest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	return col
}

// A made-up caller's span: the parent of the calls the test sends with a
// traceparent header.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// traceOf is one trace as a test reads it.
type traceOf struct {
	t     *testing.T
	spans map[string]telemetrytest.Span
}

func (tr traceOf) String() string {
	var lines []string
	for _, s := range tr.spans {
		lines = append(lines, s.String())
	}
	return strings.Join(lines, "\n")
}

// find returns the one span of the trace with the given name, role and
// attribute omnistage.stage (-1: any), failing the test if there is not
// exactly one.
func (tr traceOf) find(name, role string, stage int) telemetrytest.Span {
	tr.t.Helper()
	var found []telemetrytest.Span
	for _, s := range tr.spans {
		if s.Name == name && s.Resource["omnistage.role"] == role && (stage < 0 || s.Attrs["omnistage.stage"] == fmt.Sprint(stage)) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		tr.t.Fatalf("%d spans %q of a %s process for stage %d, want 1; the trace:\n%s", len(found), name, role, stage, tr)
	}
	return found[0]
}

// childOf fails the test unless child's parent is parent.
func (tr traceOf) childOf(child, parent telemetrytest.Span) {
	tr.t.Helper()
	if child.ParentID != parent.SpanID {
		tr.t.Errorf("%v is not a child of %v; the trace:\n%s", child, parent, tr)
	}
}

// TestTraceAcrossStageServers runs the built-in pipeline on three headless
// stage servers, driven by omnistage run and by a router that passes no
// trace headers: each request is one trace across every process, its
// parent links following the route.
func TestTraceAcrossStageServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers with the real engines")
	}
	col := exportTo(t)
	var stages []*server
	for id := range 3 {
		stages = append(stages, serve(t, "--stage", fmt.Sprint(id)))
	}
	cmd := exec.Command(omnistage(t), "run", "--stage", stages[0].url, "--stage", stages[1].url, "--stage", stages[2].url,
		"--timestamps", "-o", filepath.Join(t.TempDir(), "run.wav"), "Tracing one request. Across three servers.")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("omnistage run: %v\n%s", err, out)
	}

	// A router that sends the first call with a traceparent header and
	// posts each answer on as it is, headers dropped.
	body := []byte(`{"stage_id": 0, "stage_input": {"text": "A chain of calls."}, "output_modalities": ["audio", "timestamps"]}`)
	for hops := 0; ; hops++ {
		var ans struct {
			StageID  int  `json:"stage_id"`
			Finished bool `json:"finished"`
		}
		stage := 0
		if hops > 0 {
			_ = json.Unmarshal(body, &ans)
			stage = ans.StageID
		}
		req, _ := http.NewRequest(http.MethodPost, stages[stage].url+"/v1/run", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if hops == 0 {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stage %d: %d %.300s (%v)", stage, resp.StatusCode, body, err)
		}
		if err := json.Unmarshal(body, &ans); err != nil {
			t.Fatal(err)
		}
		if ans.Finished {
			break
		}
	}
	// Stopping a server exports what it still holds.
	for _, s := range stages {
		s.stop(t)
	}

	var runTrace string
	for _, s := range col.Spans() {
		if s.Name == "omnistage run" {
			runTrace = s.TraceID
		}
	}
	if runTrace == "" {
		t.Fatalf("no span from omnistage run among %v", col.Spans())
	}
	t.Run("coordinator", func(t *testing.T) {
		tr := traceOf{t, col.Trace(runTrace)}
		root := tr.find("omnistage run", "run", -1)
		pids := map[string]bool{root.Resource["process.pid"]: true}
		for id, name := range []string{"talker", "vocoder", "aligner"} {
			srv := tr.find("POST /v1/run", "stage", id)
			call := tr.spans[srv.ParentID]
			if call.Kind != "SPAN_KIND_CLIENT" || call.Resource["omnistage.role"] != "run" {
				t.Errorf("stage %d's server span's parent is %v, want omnistage run's call", id, call)
			}
			tr.childOf(call, root)
			tr.childOf(tr.find("stage "+name, "stage", id), srv)
			pids[srv.Resource["process.pid"]] = true
			// The stage server's log lines name the trace.
			if !strings.Contains(stages[id].out.String(), `"trace_id":"`+runTrace+`"`) {
				t.Errorf("stage %d's log has no line with the trace id", id)
			}
		}
		if len(pids) != 4 {
			t.Errorf("the trace spans %d processes, want 4 (omnistage run and three servers)", len(pids))
		}
	})
	t.Run("payload", func(t *testing.T) {
		tr := traceOf{t, col.Trace(callerTrace)}
		parent := telemetrytest.Span{SpanID: callerSpan, Name: "caller"}
		for id, name := range []string{"talker", "vocoder", "aligner"} {
			srv := tr.find("POST /v1/run", "stage", id)
			// The first call's parent is its header's; each next call's,
			// with no header, the span that made its payload.
			tr.childOf(srv, parent)
			tr.childOf(tr.find("stage "+name, "stage", id), srv)
			parent = srv
		}
	})
}

// TestTraceProcessPlacement traces a speech request whose vocoder runs in
// a worker process: the worker's spans join the front end's trace, under
// the call that reached it.
func TestTraceProcessPlacement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and a worker with the real engines")
	}
	col := exportTo(t)
	front := serve(t, "--config", writeFile(t, "process.yaml", ttsWith(t, "    - {id: 1, placement: process}\n")))
	req, _ := http.NewRequest(http.MethodPost, front.url+"/v1/audio/speech", strings.NewReader(`{"model": "tts-1", "input": "Traced through a worker.", "response_format": "wav"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("speech: %d %.300s (%v)", resp.StatusCode, data, err)
	}
	front.stop(t) // and its worker: both export what they hold

	tr := traceOf{t, col.Trace(callerTrace)}
	httpSpan := tr.find("POST /v1/audio/speech", "server", -1)
	tr.childOf(httpSpan, telemetrytest.Span{SpanID: callerSpan})
	request := tr.find("request tts", "server", -1)
	tr.childOf(request, httpSpan)
	tr.childOf(tr.find("stage talker", "server", 0), request)
	vocoder := tr.find("stage vocoder", "server", 1)
	tr.childOf(vocoder, request)
	if want := []string{"bound", "started", "first_output"}; strings.Join(vocoder.Events, ",") != strings.Join(want, ",") {
		t.Errorf("the vocoder's span has events %v, want %v", vocoder.Events, want)
	}
	call := tr.spans[tr.find("POST /v1/run", "worker", 1).ParentID]
	if call.Kind != "SPAN_KIND_CLIENT" {
		t.Errorf("the worker's server span's parent is %v, want a client call", call)
	}
	tr.childOf(call, vocoder)
	worker := tr.find("POST /v1/run", "worker", 1)
	tr.childOf(tr.find("stage vocoder", "worker", 1), worker)
	if worker.Resource["process.pid"] == vocoder.Resource["process.pid"] {
		t.Errorf("the worker's spans come from the front end's process")
	}
}
