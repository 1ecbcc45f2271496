// Package hop is POST /v1/run seen from below the orchestrator: the
// names and JSON bodies both sides of the call share, and the client of
// stage servers (Client; Caller, which is how a pipeline's stage runs on
// a replica elsewhere, for placements remote and process). The stage
// server's side is package stageserver, the coordinator that drives a
// whole request across stage servers package coordinator; the bytes of
// what travels between stages are package payload's.
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
// the stage takes each as it comes, and its prompt's Feed holds the text
// so far. The answer's headers come as soon as the stage is bound to a
// replica, before any output, and say what the one-shot answer says in
// its fields: X-Request-Id, HeaderStage (the stage that takes the answer
// next, or the stage that ran), HeaderFinished, and HeaderOutput when the
// request selected the stage's output. The answer's body is a payload
// stream: a hand-off to the next stage, which a coordinator may post to
// that stage's server as it arrives without reading it, or, when finished,
// a result stream of the stage's output. A streamed payload carries no
// outputs of earlier stages: a coordinator keeps the data of every answer
// that has HeaderOutput as it passes. A failure before the answer's
// headers is an HTTP error status, as in the one-shot form; one after them
// ends the stream with an error frame carrying the status, code and
// message.
//
// # Errors
//
// Every error of a call is one of three kinds, so that a caller can tell
// whose fault it was: an *HTTPError (the server answered with an error
// status, or an error frame), a *TransportError (the connection failed or
// the stream was cut short: the replica may be gone), or a
// *payload.Error (the answer was not what the protocol says).
//
// # Transport
//
// A streamed hop is one HTTP/1.1 request whose body and answer stream at
// once (full duplex), each frame flushed as it is written; its connection
// is kept alive for the next call when both bodies ended cleanly.
// Cancelling the call closes the connection: the server sees it at once
// and ends the hop. Back-pressure is TCP's. HTTP/1.1 was chosen over
// HTTP/2 without TLS (h2c) by measurement: BenchmarkTransport in this
// package compares the two with the same framing and signing (h2c cost
// 1.4 to 1.5 times as much per call and per chunk here, since Go's HTTP/2
// hands every 4 KiB of an answer between goroutines and flow control adds
// writes of its own; gRPC runs over HTTP/2 too). What HTTP/1.1 gives up: a
// hop holds a connection of its own while it runs. Proxies between hops
// must not buffer bodies (a Kubernetes Service does not). Stage servers
// also speak h2c, to clients that want it.
package hop
