// Package payload is the envelope that POST /v1/run hands from one stage to
// the next (opaque to callers, self-contained, versioned and optionally
// signed) and the payload stream that a streamed /v1/run sends in both
// directions, the same envelope with its data sent chunk by chunk. The
// format (byte layouts, msgpack bodies, signing, keys and expiry, checks,
// error codes, versions) is described in docs/payload.md, at the root of
// the repository; the tests check its schema tables and its error codes
// against this package.
//
// A stage server that runs stage N of a request returns, unless N is the
// request's final stage, a payload for the next stage. It carries
// everything the next server needs (the data, the whole sampling_params
// array, the original prompt, the selected output modalities, outputs
// collected for the final answer, the trace context), so that any replica
// of any stage server can take it and no server keeps per-request state.
//
// A Codec holds what a server needs to write and read payloads: its keys (a
// Ring, which SetRing replaces while the codec is in use), its size limit,
// and, when it has one, its payload lifetime and clock. Encode and Decode
// turn an Envelope into the stage_input string of a one-shot call and
// back; AppendEncode writes the string into a buffer the caller reuses,
// and a Decoder decodes one as it arrives, part by part, checking its
// header before it decodes the rest. A decoded envelope owns the buffer
// its payload was decoded into: its numeric chunk data (samples, frame
// params, segment times, data bytes) are that buffer, read in place, for
// as long as the caller keeps the envelope, or until it gives the buffer
// back for reuse (Decoder.Release) once every reader of the data is done.
// NewStreamWriter and NewStreamReader write and read a payload stream
// frame by frame, each frame checked as it arrives; a stream's chunks are
// copied out of the reader's buffer. The msgpack of
// the bodies is written and read by hand (msgpack.go), driven by one
// schema (schema.go) that states every map once for the encoder, the
// strict decoder and the document.
//
// Every failure of the input is an *Error whose Code says which check
// failed. An error of another type is the caller's bug or, for a stream,
// the failure of its reader, wrapped so that a caller can tell a lost peer
// from bad input (a stream cut short is an *Error with CodeTruncated that
// wraps io.ErrUnexpectedEOF).
package payload
