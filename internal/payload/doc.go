// Package payload is the envelope that POST /v1/run hands from one stage to
// the next: opaque to callers, self-contained, versioned and optionally
// signed.
//
// A stage server that runs stage N of a request returns, unless N is the
// request's final stage, a stage_input string for the next stage. That
// string carries everything the next server needs (the data, the whole
// sampling_params array, the original prompt, the selected output
// modalities, outputs collected for the final answer), so that any replica
// of any stage server can take it and no server keeps per-request state.
//
// # Wire format
//
// A stage_input string is the URL-safe base64 encoding without padding
// (RFC 4648 §5, "raw URL") of
//
//	offset  size  content
//	0       4     magic "OSTG"
//	4       1     format version, FormatVersion (1)
//	5       1     flags: bit 0 set = signed; the other bits are 0
//	6       n     body: one msgpack map, the Envelope
//	6+n     32    when signed: HMAC-SHA256(key, bytes 0..6+n), the tag
//
// URL-safe base64 needs no escaping in JSON, URLs or headers. Decoding is
// strict: padding, line breaks and non-zero trailing bits are refused, so a
// payload has exactly one spelling. Every version-1 payload starts with
// "T1NURwEA" (unsigned) or "T1NURwEB" (signed).
//
// The body is a msgpack map with these keys, all required, each with
// exactly this msgpack type; unknown and repeated keys are refused:
//
//	v   int    format version, equal to the header's
//	p   str    pipeline name
//	dg  bin    the pipeline digest, 32 bytes
//	x   str    transfer id
//	r   str    request id
//	f   int    from: the stage that produced d
//	t   int    to: the stage that must run next
//	sp  array  sampling_params by stage id: each nil or bin (JSON text)
//	in  map    prompt: {"text": str}
//	o   array  selected output modalities: str
//	fs  int    final stage
//	c   array  carried outputs: {"s": int stage, "k": str kind, "d": chunks}
//	d   array  data: chunks
//
// A chunk is a map with one of the engine.Chunk keys ("t", "f", "s", "a",
// "w") whose value is a map with every key of the engine type's msgpack tags.
// Numeric slices (audio samples, frame params and strengths, segment times
// and pitch targets) are bin values holding little-endian int16 or IEEE 754
// float32 elements; the format is defined by this package, not by the
// engine types' reflection encoding. Integers must fit in 32 bits; floats
// are msgpack float32.
//
// # Signing
//
// A Codec with a key signs every payload and refuses payloads that are
// unsigned, altered (any byte: header, body or tag) or signed with another
// key; tags are compared in constant time. The tag covers the header, so
// clearing the signed flag does not turn a signed payload into an accepted
// unsigned one. A Codec without a key writes unsigned payloads and reads
// signed ones without checking their tags: it cannot check them, and it
// accepts unsigned payloads anyway. The signature proves the payload came
// from a server holding the key; it does not hide the payload's contents
// and does not stop a payload from being replayed.
//
// # Checks
//
// Decode checks, in order: the size (before decoding the base64), the
// base64, the magic, the version and flags, the signature, the msgpack
// structure, then the envelope against the server's Expect: its pipeline
// and digest, the stage ids against the pipeline, that it is addressed to
// this server's stage, its required fields, its sampling_params length, and
// every chunk's structure. Every failure is an *Error whose Code says which
// check failed.
//
// # Versioning
//
// A change to the header or body layout, the meaning of a key, or the flags
// gets a new FormatVersion. A server reads only its own version and refuses
// any other with CodeUnsupportedVersion, naming both versions: stage
// servers of one deployment run the same release, and a request in flight
// across an upgrade is retried from stage 0. The digest does the same for a
// pipeline's configuration: a payload made before the stages or route
// changed is refused with CodeWrongPipeline.
package payload
