// Package api is omnistage's HTTP server: an OpenAI-compatible speech
// endpoint, a native generate endpoint, the stateless one-stage /v1/run
// endpoint, request abort and lookup, models, health, readiness and
// metrics, and a web playground at /. The JSON shapes live in package apijson; errors and their statuses
// in package httperr.
//
// # Errors
//
// Every error, an unknown route (404) or method (405, with Allow) included,
// is {"error": {"message", "type", "code"}}: type invalid_request_error for
// 4xx and server_error for 5xx; code is the orchestrator's (bad_request,
// conflict, not_found, overloaded, unavailable, aborted, abort_failed,
// replica_lost, stage_failed, timeout), the payload package's (payload_*),
// or this package's (invalid_json, body_too_large, body_timeout,
// unknown_route, method_not_allowed, invalid_api_key, model_not_found,
// wrong_stage, not_ready, unsupported_media_type, forbidden_origin,
// forbidden_host, and those below). A 503 carries Retry-After. Bad input is
// a 4xx; a 500 is a bug.
//
// So are the answers to requests no route sees. Under Run, what net/http
// refuses itself is answered in the same shape (see answerConn): a request
// line and headers over MaxHeaderBytes, 431 headers_too_large; a
// malformed request line, header or Host, 400 bad_request ("malformed
// HTTP request: ..."); headers not complete within the read-header
// timeout, 408 header_timeout (a connection that sent nothing is closed
// without an answer); an Expect other than 100-continue, 417
// expectation_failed; a transfer coding other than chunked, 501
// unsupported_transfer_encoding; an HTTP version other than 1.x (or h2c),
// 505 unsupported_http_version. Each closes the connection. A path that is
// not in canonical form ("/v1//generate", "/v1/../metrics"), which
// ServeMux would redirect, is a 404 unknown_route naming the canonical
// path, and the request target * a 400 (see canonical). A failure after the response headers were sent is logged and ends
// the stream cleanly, with an in-band error (an error event, or the
// X-Stream-Error trailer for chunked audio). Streamed answers wait for the
// first output before sending headers, so a request that fails before
// producing anything gets a plain error status.
//
// Responses of POST endpoints that submit a request carry X-Request-Id.
// Request ids come from the body's request_id or the X-Request-Id header
// (both only if equal), else are generated; an id still active is a 409. A
// client that disconnects aborts its request.
//
// # POST /v1/audio/speech
//
// OpenAI's request: {"model", "input", "voice", "response_format",
// "speed", "instructions", "stream_format"}; unknown fields are a 400.
//
//   - model: the pipeline's name, or the aliases tts-1, tts-1-hd and
//     gpt-4o-mini-tts (all the same pipeline); anything else is a 404
//     model_not_found.
//   - voice: a name, or an object {"id": name}: one of the talker's voices
//     (slt, rms, awb, kal16 for flite) or an alias of one (voice_aliases in
//     the configuration; by default OpenAI's: alloy, coral, nova, sage,
//     shimmer, marin → slt; echo, onyx, ash, cedar → rms; fable, ballad,
//     verse → awb), any case; omitted means the stage's configured voice;
//     unknown is a 400 that lists them. GET /v1/audio/voices lists them too.
//   - speed: 0.25 to 4.0.
//   - voice and speed become stage 0's sampling params {"voice", "speed"}.
//   - instructions: accepted and ignored.
//   - response_format: mp3 (the default when omitted, as OpenAI's), opus
//     (Ogg Opus), aac (ADTS, through ffmpeg: a 400 when it is missing),
//     flac, wav, or pcm, raw 16-bit little-endian mono at the pipeline's
//     own rate, which the X-Sample-Rate header states (16000 for the tts
//     pipeline, 24000 for tts-24k; OpenAI's pcm is always 24 kHz, so an
//     OpenAI client that assumes 24 kHz should use tts-24k). Package
//     encode has the encoders and content types; one encoder per response
//     is fed as the chunks come, so a streamed file decodes as the whole
//     file does.
//   - stream_format omitted: the whole file, with Content-Length.
//     "audio": chunked audio, written and flushed per engine chunk as it
//     is produced; wav starts with a streaming header whose sizes are
//     0xFFFFFFFF (unknown length). "sse": server-sent events
//     data: {"type": "speech.audio.delta", "audio": "<base64>"} per chunk
//     (the encoded format's bytes; raw PCM for wav and pcm), then
//     data: {"type": "speech.stages", "stages": [{"stage", "name",
//     "replica", "bound_ms", "start_ms", "first_output_ms", "end_ms"}, ...]}
//     (each route stage's timeline, in ms since the request was admitted:
//     its replica bound, its engine started, its first output, its end),
//     then
//     data: {"type": "speech.audio.done", "usage": {"input_tokens",
//     "output_tokens", "total_tokens", "audio_duration_ms"}}, where
//     input_tokens counts the input's characters and output_tokens is 0.
//   - Word timestamps: request header X-Word-Timestamps: true adds the
//     timestamps output. Not streamed, they come as compact ASCII JSON,
//     [{"word","char_start","char_end","start_ms","end_ms","spoken"}, ...]
//     (one entry per token of the input: word is input[char_start:char_end],
//     offsets in code points; spoken the words said for it), in the
//     X-Word-Timestamps
//     response header, up to MaxTimestampsHeader (4 KiB); longer ones are
//     left out and the X-Word-Timestamps-Omitted header says why and where
//     to get them. With sse they come as data: {"type":
//     "speech.word_timestamps", "words": [...]} events, one per sentence
//     as soon as the aligner has it (between the audio deltas; times from
//     the start of the whole audio), all before done. With
//     stream_format audio they are refused (400): trailers are not read by
//     most clients, and Go's refuses trailers over 4 KiB.
//
// # POST /v1/generate
//
// {"input": "text" | {"text": "..."}, "output_modalities": [...],
// "sampling_params": [by stage id, null for defaults], "request_id": "...",
// "stream": false | true | "ndjson" | "sse"}. Not streamed, the answer is
// {"request_id", "outputs": [{"stage", "modality", "finished", "audio" |
// "timestamps" | "text"}]}: every selected output in route order, finished
// true for the final stage's output; audio is {"format": "wav",
// "sample_rate", "duration_ms", "data": base64 WAV}. Streamed (true or
// "ndjson": one JSON object per line; "sse": each as a data: event), one
// {"type": "output", "request_id", "stage", "modality", "final", "audio" |
// "timestamps" | "text"} per chunk as it comes, audio as {"format": "pcm",
// "sample_rate", "duration_ms", "data": base64 PCM}, then {"type": "done",
// "request_id"}, or {"type": "error", "request_id", "error": {...}} if the
// request fails after the first event.
//
// output_modalities are audio, timestamps or text, each at most once; the
// intermediate kinds frames and segments cannot be selected (400). Each
// entry of sampling_params must be an object or null and is checked by its
// stage's engine, whether or not the request runs that stage (a skipped
// stage, the aligner of an audio-only request); an unknown param is a 400
// "sampling_params[i]: stage i (name): invalid sampling params: field:
// unknown field; this stage takes only ...". A bad value is reported
// before a wrong array length. The entry of POST /v1/run checks both the
// same way (package pipeline: CheckModalities, Selection.CheckParams).
//
// # POST /v1/run
//
// Runs exactly one stage, statelessly (see DESIGN.md), one-shot (JSON) or
// streamed (a payload stream in, one out). Package hop serves it and
// documents both forms; this package mounts it behind the same API key,
// metrics and access log as every route.
//
// # Other endpoints
//
//   - DELETE /v1/requests/{id}: abort the request of that id, and every
//     /v1/run hop of it, and wait for the drain: 200 {"id", "state":
//     "aborted"}; 404 unknown; 504 abort_failed when the drain outlasts the
//     pipeline's abort timeout.
//   - GET /v1/requests/{id}: {"id", "state": "active" | "aborting" |
//     "abort_failed"} while the id is held; 404 after.
//   - GET /v1/models: {"object": "list", "data": [{"id", "object": "model",
//     "created", "owned_by": "omnistage"}]}: the pipeline, then the aliases.
//   - GET /v1/pipeline: the served route, read-only: {"name", "route":
//     [the ids of the stages a request runs, in order, without the
//     aligner], "stages": [{"id", "name", "engine", "placement", "input",
//     "output", "skipped"}, ...] (every declared stage, by id; skipped
//     true for those off the route), "aligner": {"id", "name", "engine",
//     "placement"} or null, "outputs": [the modalities a request may
//     select]}.
//   - GET /: the playground (package playground), a static page whose
//     script and style sheet are under /playground/: a speech form that
//     plays POST /v1/audio/speech (pcm, sse, word timestamps) as it
//     streams, highlights each input word as it is spoken, and draws GET
//     /v1/pipeline and the speech.stages timings. The page and its files
//     need no API key, and may load nothing but this server
//     (Content-Security-Policy); the page sends the key the user types with
//     each API call.
//   - GET /health: {"status": "ok"} while the process serves.
//   - GET /ready: {"status": "ready"} once every replica warmed up; 503
//     not_ready before that and while shutting down.
//   - GET /metrics: Prometheus text of the registry: the orchestrator's
//     metrics, omnistage_http_requests_total{route, code},
//     omnistage_http_request_duration_seconds{route},
//     omnistage_http_time_to_first_byte_seconds{route} and
//     omnistage_http_requests_inflight.
//
// A headless stage server (Options.Stage) serves POST /v1/run for its stage
// only (any other stage is a 400 wrong_stage), GET and DELETE
// /v1/requests/{id} for the hops of a request there, plus /health, /ready,
// /metrics and /v1/models; the other endpoints are a 404 that says so.
//
// # Limits
//
// With Options.APIKey set, every endpoint but /health, /ready and the
// playground's static files needs Authorization: Bearer KEY (compared in
// constant time); else 401. Bodies
// are bounded (MaxBody, 1 MiB; MaxRunBody for a one-shot /v1/run, sized to
// the codec's largest payload; each frame of a streamed one by the codec)
// with a 413 beyond, and read under a deadline.
// Run adds a read-header timeout (ReadHeaderTimeout), an idle timeout, a
// bound on request headers (MaxHeaderBytes), and a bound on open
// connections (MaxConns): past it, a new connection takes the slot of the
// one idle, else silent, the longest, so idle keep-alive connections and
// silent sockets cannot lock clients out. There is no write timeout that
// would cut a long stream, but each write must finish within
// ChunkWriteTimeout. Run serves HTTP/1.1 and HTTP/2 without TLS (h2c,
// prior knowledge).
//
// # Cross-site protection
//
// POST endpoints take only their content type, application/json (and
// /v1/run the streamed hop type too): else 415 unsupported_media_type. A
// request with an Origin header that is neither the server's own nor one
// of Options.CORSOrigins is a 403 forbidden_origin. A server listening on a
// loopback address answers only to a Host that is a loopback name or
// address, or the host of one of Options.CORSOrigins: else 403
// forbidden_host (DNS rebinding). See checkSite.
package api
