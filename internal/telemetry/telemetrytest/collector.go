// Package telemetrytest is a stand-in OpenTelemetry collector for tests: an
// OTLP/HTTP (protobuf) trace receiver on a loopback port that keeps every
// span it is sent, so a test can check the traces of processes it starts
// (they export to it through OTEL_EXPORTER_OTLP_ENDPOINT).
package telemetrytest

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	TraceID, SpanID, ParentID string // hex; ParentID "" for a root
	Name                      string
	Kind                      string // SPAN_KIND_SERVER, ...
	Attrs                     map[string]string
	Resource                  map[string]string // service.name, omnistage.role, process.pid, ...
	Events                    []string
	Error                     bool // status code error
}

func (s Span) String() string {
	return fmt.Sprintf("%s[%s pid %s] %s<-%s", s.Name, s.Resource["omnistage.role"], s.Resource["process.pid"], short(s.SpanID), short(s.ParentID))
}

func short(id string) string { return id[:min(len(id), 6)] }

// Collector receives spans at URL + "/v1/traces".
type Collector struct {
	URL string

	mu    sync.Mutex
	spans []Span
	bad   []string // requests it could not decode
}

// Start starts a collector for the length of the test.
func Start(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.bad) > 0 {
			t.Errorf("the collector could not decode %d exports: %s", len(c.bad), strings.Join(c.bad, "; "))
		}
	})
	return c
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err == nil && (r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf") {
		err = fmt.Errorf("%s %s with %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.bad = append(c.bad, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{
					TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					ParentID: hex.EncodeToString(sp.GetParentSpanId()),
					Name:     sp.GetName(), Kind: sp.GetKind().String(),
					Attrs: attrs(sp.GetAttributes()), Resource: res,
					Error: sp.GetStatus().GetCode().String() == "STATUS_CODE_ERROR",
				}
				for _, e := range sp.GetEvents() {
					s.Events = append(s.Events, e.GetName())
				}
				c.spans = append(c.spans, s)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(nil)
}

func attrs(kvs []*common.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *common.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *common.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		default:
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Trace returns the received spans of one trace, by span id.
func (c *Collector) Trace(traceID string) map[string]Span {
	m := map[string]Span{}
	for _, s := range c.Spans() {
		if s.TraceID == traceID {
			m[s.SpanID] = s
		}
	}
	return m
}
