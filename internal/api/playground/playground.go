// Package playground is the web page that omnistage serve answers at /: a
// form for a speech request to one of the server's pipelines, picked from
// GET /v1/models, that plays the audio while it streams, highlights each
// word of the input as it is spoken (when the pipeline has an aligner),
// draws the chosen pipeline and each request's stage timings, and shows
// the request's id, times and errors.
//
// The page is static: index.html, playground.js, live.js, image.js and
// playground.css, plain HTML, JavaScript and CSS with no build step,
// embedded in the binary. It requests nothing but the server that served
// it (the API's JSON and SSE endpoints, and in live mode the speech
// stream's WebSocket, with the API key the user typed, kept in the page's
// memory only).
//
// Live mode (live.js) streams the text as it is typed, or fed word by word
// from the text box at a chosen rate as an LLM would, over WS
// /v1/audio/speech/stream, plays each sentence as it comes, lights each
// word as it is spoken when the model times words, and barges in with
// Stop (input.cancel). Image mode (image.js), for a model that reads
// images, takes an image picked or dropped on the page instead of text,
// sends it to POST /v1/generate (a multipart form, streamed as NDJSON),
// draws each text region's box over the image as it is read, shows the
// recognized text and the answer's notes, and for a model that speaks
// plays the audio as it streams, lighting the word spoken and its region's
// box. Package api serves Files; docs/api.md describes the endpoints the
// page calls.
//
// For tests the page keeps its counters in window.omnistagePlayground:
// ready, state, model (the pipeline drawn, whose voices are listed and
// which a request names), samplesReceived, samplesScheduled,
// samplesPlayed, sampleRate, highlighted (the input's words, as sliced
// from the input, in the order they were spoken), stagesDrawn,
// pipelineDrawn, requestId, wavBytes and lastError ({status, code,
// message} or null); live mode's in live: state, utterances (ended
// with session.done), sentences (their sentence_text, in order),
// firstAudioSent (the characters sent when the first audio.start came),
// beforeDone (per utterance, whether its first audio came before its
// input.done), cancelled (the last audio.cancelled event, or
// null), audioAfterCancelled (audio messages that came after it: none
// should), bytes and errors; and image mode's in image: active (whether
// the chosen model reads images), requests, file (the name of the image
// chosen), regions (the boxes drawn), text (the recognized text),
// notes (their messages) and litRegions (the indexes of the regions whose
// boxes were lit, in turn).
package playground

import "embed"

// Files holds the page: index.html and the assets it loads.
//
//go:embed index.html playground.js live.js image.js playground.css
var Files embed.FS

// Index is the name of the page in Files.
const Index = "index.html"
