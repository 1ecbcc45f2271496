// Package loadgen is omnistage's load generator, what `omnistage bench`
// runs: it sends speech requests to a running server over HTTP (HTTP) or to
// an orchestrator in this process (InProcess), measures each one, and
// reports throughput, latency and time-to-first-audio percentiles, the
// real-time factor, errors by code, and whether the system under load went
// back to rest afterwards (the leak check).
//
// # Requests
//
// Request i speaks Options.Texts[i mod len] (DefaultTexts unless given).
// Over HTTP it is POST /v1/audio/speech {"model", "input",
// "response_format": "pcm", "stream_format": "audio"} with an X-Request-Id
// header: the answer is raw 16-bit mono PCM at the rate of the X-Sample-Rate
// header, sent as the pipeline makes it, so the time to the first body
// byte is the time to first audio and the audio length is bytes/2/rate.
// In process it is the same request submitted to the orchestrator, which
// the speech endpoint would submit.
//
// # Arrivals
//
// With Options.Concurrency, that many workers each send a request, wait for
// it to end and send the next (a closed loop). With Options.Rate, requests
// start 1/Rate seconds apart whatever the server does (an open loop; each
// arrival time is computed from the start, so pacing does not drift); at
// most MaxOutstanding requests are in flight, and latency counts from the
// arrival time a request was due, so an arrival that had to wait for a
// free slot shows as latency rather than hiding (no coordinated omission).
// The run ends after Options.Requests requests, or once Options.Duration
// has passed (requests in flight then are waited for and counted).
//
// # Aborts
//
// Each request is picked for abort with probability Options.AbortRatio,
// from a random source seeded with Options.Seed and the request's index,
// so a run's choices do not depend on timing. A picked request is aborted
// at a random point of its stream: once it has received a uniformly random
// fraction of the audio that its text gave the last time it ran to the end
// (before any request of that text ended, a fraction of the audio per
// character seen so far; before any request ended at all, at its first
// audio). Half of the aborts (AbortBoth) send DELETE /v1/requests/{id}
// (in process, Orchestrator.Abort) and then hang up; the other half just
// hang up (in process, cancel the request's context). An aborted request
// counts as aborted, not as an error, whether or not its stream would have
// ended by itself by then (a DELETE that finds the request already ended,
// 404, is still an abort: the client stopped there). A DELETE that fails
// otherwise (504 abort_failed, say) makes the request an error with that
// code.
//
// # Request ids
//
// Every request carries an id of the form bench-RUN-N, RUN random per run.
// With Options.ReuseIDs = K the ids come from a pool of K instead, and an
// id goes back to the pool only once its request has ended on the server:
// at once after a complete stream or a drained DELETE, else once GET
// /v1/requests/{id} answers 404 (in process, Orchestrator.Lookup says the
// id is free). A request then never waits for an id the server still
// holds, and a 409 conflict is the server's fault. With fewer ids than
// workers, workers wait for a free id.
//
// # Outcomes and error codes
//
// A request is ok when its stream ended cleanly with audio, aborted as
// above, or an error with a code: the JSON error's code for an HTTP error
// status (overloaded, not_ready, ...), or http_STATUS when the body has
// none; the code of the X-Stream-Error trailer for a stream that failed
// after it started; the orchestrator's code in process; timeout when
// Options.Timeout passed; transport for a connection failure;
// bad_response for a 200 answer without a usable X-Sample-Rate or without
// audio; interrupted for requests cut short because the run itself was
// cancelled.
//
// # Report
//
// Report holds the results; its JSON keys are those of `omnistage bench
// --json` and are documented on its fields.
package loadgen
