// Package engine defines the contract between the runtime and the code that
// computes one stage, and the registry that maps config engine names to
// constructors.
//
// # Lifecycle of a replica
//
// The runtime calls a Driver's New once per replica, then Warm once before the
// replica is reported ready, then Process any number of times (concurrently,
// up to the stage's in-flight limit), and Close exactly once after the last
// Process call has returned.
//
// # One request
//
// Process is given a Job. It reads input chunks from Job.In until Recv returns
// io.EOF, and writes output chunks with Job.Out.Send. It returns nil when it
// has written its whole output. The runtime closes the output stream after
// Process returns; the engine never closes anything it was given. Its input
// pushes back on the stage upstream, and on the request's output beside it:
// an engine that may wait mid-job for something other than its input (a
// resource other jobs share) reads through Prefetch.
//
// Chunks are immutable once sent: a chunk passed to Send (and the slices
// inside it) must not be modified afterwards by anyone. The runtime may hand
// the same chunk to several readers (the next stage and the caller, when
// both want a stage's output), so an engine treats the chunks it receives as
// read-only and writes its results into new slices.
//
// # Turns on the CPU
//
// An engine runs each unit of CPU work of a request (a sentence's
// synthesis, its vocoding, its alignment) between Turn and the function
// it returns, and waits for nothing in between: the runtime gives turns
// to the request that will run out of audio first, so that a request that
// has not spoken yet goes ahead of the later sentences of others. A unit
// whose result is needed only when the listener reaches some point of the
// audio (an aligner's sentence) says so with NeededAt, and is due then.
//
// # Batches
//
// An engine whose units of work can run several at once in one call (a
// neural model over a batch) implements Batcher and hands its units to
// RunBatched: the runtime gathers the units that concurrent requests hand
// to one replica into batches, each run in one RunBatch call, and gives
// each request its own results. An item's bad input fails that item
// only (its Err); RunBatch's error fails the batch's items as the
// server's fault.
//
// # Replay after a lost replica
//
// When the replica running a job is lost mid-stream (Watcher,
// ErrReplicaLost), the runtime can run the job again on another replica
// of the stage, if the stage allows it: its engine's Driver sets Replay,
// or its replica implements Replayer, and the stage's deploy entry does
// not say migrate: false. The new run gets the job's input again from
// the start of the first unit of work whose output was not delivered
// whole downstream, and the runtime splices its output onto what was
// delivered (Replay.Deterministic says how).
//
// Units of work are sentences, marked by Span: on a stage's input and on
// its output, a chunk that carries a Span begins the unit of its
// sentence, and the chunks after it, up to the next one that carries a
// Span, belong to it; UnitEnds tells a chunk that completes its unit. A
// replayable engine
//
//   - puts the Span of each unit of its input on the first chunk of that
//     unit's output (a vocoder's first block of a sentence), or, when its
//     input carries no Spans (a talker's text), numbers its output's
//     units from 0;
//   - makes a unit's output from that unit's input and the input before
//     it, so that a run given the input from the start of unit k makes
//     unit k's output and what follows as the first run did: nothing
//     carried over from earlier units but what that input holds (flite's
//     vocoder seeds its noise per sentence);
//   - takes at most MaxReplayAhead units of input beyond the one whose
//     output it is sending.
//
// The runtime keeps a stage's input from the start of the first unit
// whose output is not delivered whole; an input without Spans it keeps
// whole, up to a bound, and replays from its start, skipping the units
// delivered.
//
// # Cancellation
//
// When the request is aborted or its client goes away, ctx is cancelled.
// Recv and Send then return ctx's error promptly; Process must return soon
// after (an error is fine: it is dropped). Long computations that cannot be
// interrupted (a C call) are allowed to finish; their output is discarded.
package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Engine is one running replica of a stage.
type Engine interface {
	// Warm prepares the replica for its first request (loading models, a
	// warm-up utterance). It is called once, before the replica is ready.
	Warm(ctx context.Context) error
	// Process runs one request through the stage. It may be called
	// concurrently from several goroutines.
	Process(ctx context.Context, job *Job) error
	// Close releases the replica. No Process call is running when it is called.
	Close() error
}

// Preparer is implemented by engines that want a per-request hand-shake
// before work arrives: on a streamed edge the runtime binds the producer's
// replica first, then calls Prepare on the receiver with Job.Upstream set, and
// only then starts the producer.
type Preparer interface {
	Prepare(ctx context.Context, job *Job) error
}

// Watcher is implemented by engines whose replica can be lost between calls
// (a worker process that exits, a remote host that goes away). Lost returns
// a channel that is closed when the replica is gone for good; the runtime
// then fails the requests bound to it (or replays them elsewhere) and
// sends it no more.
type Watcher interface {
	Lost() <-chan struct{}
}

// LostReasoner is implemented by Watchers that can say why their replica
// was lost (how a worker process ended). LostErr is called only after Lost
// is closed.
type LostReasoner interface {
	LostErr() error
}

// Voicer is implemented by talker engines whose voices are known only once
// a replica runs (a stage program names them when it starts); the runtime
// lists them where it would list Driver.Voices.
type Voicer interface {
	Voices() []Voice
}

// ParamsChecker is implemented by engines that can reject a request's
// sampling params before anything runs. The error should be a *ParamError.
type ParamsChecker interface {
	CheckParams(params json.RawMessage) error
}

// PromptChecker is implemented by engines that can tell, before anything
// runs, that they cannot take a request's text (a talker that has nothing
// of it to speak). The error should be an *InputError that says what the
// engine can take. A streamed request is not checked: its text comes
// later, and the engine refuses it then.
type PromptChecker interface {
	CheckPrompt(text string, params json.RawMessage) error
}

// Job is one request as seen by one stage.
type Job struct {
	// RequestID is the caller's id, for logs only.
	RequestID string
	// StageID is the id of the stage being run.
	StageID int
	// Params is this stage's entry of the request's sampling_params (JSON
	// object), or nil for the defaults.
	Params json.RawMessage
	// Prompt is the request's original input, for stages that need it beyond
	// the entry stage (the aligner needs the transcript).
	Prompt Prompt
	// Upstream names the replica bound to the producing stage ("" for the
	// entry stage).
	Upstream string
	// In yields the stage's input. The entry stage receives the prompt as one
	// Text chunk, or, for a streamed request, the pieces of its text as they
	// arrive (Prompt.Feed).
	In Source
	// Out takes the stage's output.
	Out Sink
}

// Prompt is a request's original input. A request that entered whole has
// all of it in Text. A streamed request's input arrives while it runs:
// its Feed is set, holding the text received so far until it is done,
// and Text holds what was known when the stage's job was made (for the
// entry stage's own job, nothing). Current reads either.
type Prompt struct {
	Text string `json:"text"`
	Feed *Feed  `json:"-"`
}

// Current returns the prompt's text so far and whether it is complete: Text
// and true for a whole request, the feed's for a streamed one.
func (p Prompt) Current() (text string, done bool) {
	if p.Feed == nil {
		return p.Text, true
	}
	return p.Feed.Text()
}

// Source is a stream of input chunks.
type Source interface {
	// Recv returns the next chunk, io.EOF after the last one, or ctx's error.
	Recv(ctx context.Context) (Chunk, error)
}

// Sink takes output chunks in order.
type Sink interface {
	// Send hands c to the next stage. It blocks while the receiver's buffer
	// is full (back-pressure) and returns ctx's error if ctx ends first.
	Send(ctx context.Context, c Chunk) error
}

// Options are a stage's engine options from the deploy section.
type Options map[string]any

// Decode fills dst (a pointer to a struct with json tags) from o, refusing
// unknown keys.
func (o Options) Decode(dst any) error {
	return decodeStrict(o, dst)
}

// DecodeParams fills dst (a pointer to a struct with json tags) from a
// sampling params object, strictly: every engine decodes its params with
// it, so every engine refuses the same mistakes with the same message. A
// nil or JSON null params leaves dst untouched. Every error is a
// *ParamError naming the field: an unknown field (its Reason lists the
// fields dst has), or a value of the wrong JSON type.
func DecodeParams(params json.RawMessage, dst any) error {
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return paramsError(err, dst)
	}
	if dec.More() {
		return &ParamError{Reason: "data after the JSON object"}
	}
	return nil
}

// maxEchoedField bounds the unknown field name a ParamError repeats.
const maxEchoedField = 64

// paramsError turns an error decoding params into dst into a *ParamError.
func paramsError(err error, dst any) *ParamError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &ParamError{Field: te.Field, Reason: fmt.Sprintf("want %s, got a JSON %s", JSONType(te.Type), te.Value)}
	}
	// encoding/json has no type for this error, only its message.
	if q, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, uerr := strconv.Unquote(q)
		if uerr != nil {
			name = q
		}
		return UnknownParam(name, jsonFields(dst))
	}
	return &ParamError{Reason: strings.TrimPrefix(err.Error(), "json: ")}
}

// UnknownParam is the error of a param a stage does not take, the same for
// every engine; known are the params it takes.
func UnknownParam(name string, known []string) *ParamError {
	takes := "no sampling params"
	if len(known) > 0 {
		takes = "only " + joinAnd(known)
	}
	if len(name) > maxEchoedField {
		return &ParamError{Reason: fmt.Sprintf("unknown field of %d bytes; this stage takes %s", len(name), takes)}
	}
	return &ParamError{Field: name, Reason: "unknown field; this stage takes " + takes}
}

// joinAnd joins names as "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// jsonFields lists the JSON names of the fields of the struct dst points
// to, in declaration order.
func jsonFields(dst any) []string {
	t := reflect.TypeOf(dst)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// JSONType names the JSON type that decodes into a Go value of type t ("a
// number", "an array"), for a message about a value of the wrong type.
func JSONType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	}
	return "an object"
}

func decodeStrict(v any, dst any) error {
	if v == nil {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
}

// ParamError is a bad per-request parameter: the caller's fault.
type ParamError struct {
	Field  string
	Reason string
}

func (e *ParamError) Error() string {
	if e.Field == "" {
		return "invalid sampling params: " + e.Reason
	}
	return fmt.Sprintf("invalid sampling params: %s: %s", e.Field, e.Reason)
}

// InputError is input an engine refuses (empty text, unknown voice, frames
// it cannot read): the caller's fault, reported as a 4xx.
type InputError struct {
	Reason string
}

func (e *InputError) Error() string { return "invalid input: " + e.Reason }

// UpstreamError is the error answer of a replica that runs elsewhere (a
// stage server refused the call, or its stage failed there): the
// server's status, code and message. It is the server side's failure,
// never the caller's: the runtime answers 502 with the upstream's code
// (503 when the upstream said 503: overloaded or unavailable).
type UpstreamError struct {
	Where   string // who answered: "remote http://stage-1:8101"
	Status  int
	Code    string
	Message string
}

func (e *UpstreamError) Error() string {
	return fmt.Sprintf("%s answered %d %s: %s", e.Where, e.Status, e.Code, e.Message)
}

// ErrReplicaLost is wrapped by errors that mean the replica itself is gone
// (its process died, its connection dropped). The runtime marks the replica
// unhealthy and fails the requests bound to it, or moves them to another
// replica where their stage can be replayed.
var ErrReplicaLost = errors.New("replica lost")

// ErrUnsent is wrapped by errors of a Process that failed before it took
// any of the job's input or sent any output (a stage server's connection
// refused): nothing of the request reached the replica, so the runtime
// may run the job on another replica of the stage. An error wrapping both
// ErrUnsent and ErrReplicaLost (the usual case) also takes the replica
// out of service at once.
var ErrUnsent = errors.New("nothing was sent to the replica")

// Spec is what a Driver is given to build a replica.
type Spec struct {
	StageID int
	Name    string
	Input   Kind
	Output  Kind
	Options Options
	// Replica is the replica's index in its pool.
	Replica int
	// Timeout and WarmTimeout are the stage's timeout and warm_timeout
	// (zero when not set), for engines that run a program of their own:
	// the longest a job may go without output, and the longest the
	// program may take to be ready.
	Timeout, WarmTimeout time.Duration
}

// Driver builds replicas of one engine.
type Driver struct {
	// Check validates a stage's declared kinds and options without starting
	// anything. It may be nil.
	Check func(spec Spec) error
	// New builds one replica.
	New func(spec Spec) (Engine, error)
	// Voices are the voices a talker engine speaks with (its "voice"
	// param); nil for other engines.
	Voices []Voice
	// DeployKeys are the keys of a stage's deploy entry that the engine
	// takes whatever the stage's placement, their values given in Spec
	// (an engine that runs programs of its own takes timeout and
	// warm_timeout, which otherwise bound only replicas outside the
	// runtime's process). The configuration refuses such a key on a stage
	// whose placement does not take it and whose engine does not name it.
	DeployKeys []string
	// Replay, when set, says that every replica of the engine can replay
	// its jobs from a unit boundary, and how (see Replay); such an engine
	// names "migrate" among its DeployKeys.
	Replay *Replay
}

// Voice is one voice of a talker engine.
type Voice struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Language string `json:"language"` // BCP 47: "en-US"
	Gender   string `json:"gender,omitempty"`
	// Note says what a client should know about the voice.
	Note string `json:"note,omitempty"`
	// Output, when set, is the only kind a talker makes with this voice
	// (a diphone voice's segments): the voice is listed only for a stage
	// that outputs it.
	Output Kind `json:"-"`
}

// Registry maps engine names to drivers. The zero value is empty and ready.
type Registry struct {
	mu      sync.RWMutex
	drivers map[string]Driver
}

// Register adds a driver. It panics on a duplicate name: that is a wiring bug.
func (r *Registry) Register(name string, d Driver) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drivers == nil {
		r.drivers = make(map[string]Driver)
	}
	if _, dup := r.drivers[name]; dup {
		panic("engine: duplicate driver " + name)
	}
	r.drivers[name] = d
}

// Lookup returns the driver registered under name.
func (r *Registry) Lookup(name string) (Driver, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.drivers[name]
	return d, ok
}

// Has reports whether an engine is registered under name.
func (r *Registry) Has(name string) bool {
	_, ok := r.Lookup(name)
	return ok
}

// Names lists the registered engine names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.drivers))
	for n := range r.drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
