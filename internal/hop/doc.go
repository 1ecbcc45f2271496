// Package hop is POST /v1/run, both sides: running exactly one stage of a
// pipeline per call on a stage server (Server), and calling stage servers
// (Client; Caller, for a pipeline whose stage runs elsewhere; Chain, for a
// coordinator that drives a whole request across stage servers). The
// bytes of what travels between stages are package payload's.
//
// # Two forms of one call
//
// The one-shot form is JSON, for external routers: stage 0 takes
// {"stage_id": 0, "stage_input": {"text"}, "sampling_params",
// "request_id", "output_modalities"}, a later stage {"stage_id",
// "stage_input": "<the previous answer's stage_input>"}; the answer is
// {"request_id", "stage_id", "finished": false, "stage_input": "<base64
// payload>"} for the stage named, or {"request_id", "stage_id",
// "finished": true, "output": {...}} with every selected output. The stage
// runs on its whole input, and answers once it has run.
//
// The streamed form runs the stage on its input as the input arrives and
// sends the stage's output as the stage makes it. Its request body is a
// payload stream (Content-Type ContentType): a hand-off header addressed
// to the stage to run, then the upstream stage's output, frame by frame.
// For stage 0 the request is the one-shot JSON body with Accept:
// ContentType, or, for a request whose text arrives while it runs (a
// streamed request: a voice agent's, a Wyoming stream's), a payload
// stream whose hand-off header goes from stage 0 to stage 0 with an empty
// prompt text, then the text's pieces as text data frames as they arrive:
// the stage takes each as it comes (the talker speaks each sentence once
// the next has begun), and its prompt's Feed holds the text so far. The answer's headers come as soon as the stage is bound to
// a replica, before any output, and say what the one-shot answer says in
// its fields: X-Request-Id, HeaderStage (the stage that takes the answer
// next, or the stage that ran), HeaderFinished, and HeaderOutput when the
// request selected the stage's output. The answer's body is a payload
// stream: a hand-off to the next stage, which a coordinator may post to
// that stage's server as it arrives without reading it, or, when finished,
// a result stream of the stage's output. A streamed payload carries no
// outputs of earlier stages: a coordinator keeps the data of every answer
// that has HeaderOutput as it passes (Chain does). A failure before the
// answer's headers is an HTTP error status, as in the one-shot form; one
// after them ends the stream with an error frame carrying the status, code
// and message.
//
// # Identity of a hop
//
// A hop is one call. Its request id (request_id, X-Request-Id, or the
// payload's) names the request it belongs to, for logs, X-Request-Id and
// DELETE /v1/requests/{id}, but it is not the hop's identity and it is not
// claimed: two calls with identical bodies are two hops, and both run. So
// a coordinator that retries a hop after a timeout, while the first
// attempt still runs, gets two answers, never a 409. DELETE
// /v1/requests/{id} on a stage server aborts every hop of that request
// there (see package orchestrator).
//
// # Bounds
//
// A stage server bounds every streamed hop (Limits): the rate of its
// input within a frame, the pause between two frames, and its length, so
// that a caller that sends slowly cannot hold a replica. A Chain bounds
// every silence of its calls' answers.
//
// # Transport
//
// A streamed hop is one HTTP/1.1 request whose body and answer stream at
// once (full duplex), each frame flushed as it is written; its connection
// is kept alive for the next call when both bodies ended cleanly.
// Cancelling the call closes the connection: the server's frame reader
// sees it at once, ends the hop, and the stage's engine sees its context
// end. Back-pressure is TCP's: a stage that does not read its input stops
// the server reading the connection (past the few frames it reads ahead),
// and a caller that does not read the answer blocks the server's writes,
// each bounded by a deadline.
//
// The choice was made by measurement (BenchmarkTransport, BenchmarkHop) on
// the 2-vCPU machine this project is tested on, against HTTP/2 without TLS
// (h2c), with the same framing and signing; gRPC runs over HTTP/2 too, so
// it would cost at least what h2c does, plus protobuf framing and a code
// generator, for frames that are already binary. Per call and per chunk of
// about 3 KB (100 ms of 16 kHz audio):
//
//	                           HTTP/1.1   h2c
//	echo, one frame round trip    83 µs   114 µs
//	echo, streamed, per frame     28 µs    43 µs
//	hop, per call (signed)       416 µs   611 µs
//	hop, per chunk (signed)       32 µs    44 µs
//	hop, per chunk (unsigned)     29 µs
//
// (Medians of 6 runs of go test -bench 'Transport|Hop/' -count 6; hop: a
// pass-through stage on a stage server, less the same stage in process,
// per chunk the slope from 1 to 64 chunks; a bare TCP round trip of the
// same bytes takes 23 µs here; a call's cost is mostly that of opening a
// streamed request, 424 µs for an echo.) Go's HTTP/2 server hands every
// 4 KiB of an answer to its connection goroutine and back, and flow
// control adds writes of its own. What HTTP/1.1 gives up: a hop holds a
// connection of its own while it runs (calls are few: a replica runs two
// at once by default), and a server notices a caller that went away only
// by reading or writing, which is why the server reads the input ahead of
// the stage, and, while that read-ahead is full, watches the connection's
// TCP state (WithConn). Proxies between hops must
// not buffer bodies (a Kubernetes Service does not). Stage servers also
// speak h2c, to clients that want it.
package hop
