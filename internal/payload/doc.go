// Package payload is the envelope that POST /v1/run hands from one stage to
// the next (opaque to callers, self-contained, versioned and optionally
// signed) and the payload stream that a streamed /v1/run sends in both
// directions, the same envelope with its data sent chunk by chunk.
//
// A stage server that runs stage N of a request returns, unless N is the
// request's final stage, a payload for the next stage. It carries
// everything the next server needs (the data, the whole sampling_params
// array, the original prompt, the selected output modalities, outputs
// collected for the final answer, the trace context), so that any replica
// of any stage server can take it and no server keeps per-request state.
//
// # Payloads
//
// A payload has two forms with the same content. The binary form
// (Codec.Marshal, Codec.Unmarshal) is
//
//	offset  size  content
//	0       4     magic "OSTG"
//	4       1     format version, FormatVersion (3)
//	5       1     flags: bit 0 set = signed; the other bits are 0
//	6       8     key id: when signed, the KeyID of the key that signed it;
//	              zeros when unsigned
//	14      8     issued at: when the payload was made, Unix time in
//	              milliseconds, big-endian
//	22      n     body: an envelope map (see Bodies)
//	22+n    16    when signed: the nonce, random bytes new for every payload
//	38+n    16    when signed: the tag of bytes 0..22+n (see Signing)
//
// The stage_input string of /v1/run, for JSON (Codec.Encode,
// Codec.Decode), is the URL-safe base64 encoding without padding (RFC 4648
// §5, "raw URL") of the binary form. It needs no escaping in JSON, URLs or
// headers. Decoding is strict: padding, line breaks and non-zero trailing
// bits are refused, so a payload has exactly one spelling. Every version 3
// payload starts with "T1NURwMA" (unsigned) or "T1NURwMB" (signed).
//
// # Payload streams
//
// The body of a streamed /v1/run, in both directions, is a payload stream
// (Codec.NewStreamWriter, Codec.NewStreamReader): a preamble, then frames.
//
//	preamble offset  size  content
//	         0       4     magic "OSTS"
//	         4       1     stream format version, StreamVersion (2)
//	         5       1     flags: bit 0 set = signed; the other bits are 0
//	         6       8     key id, as in a payload's header
//	         14      8     issued at: when the stream was begun, as in a
//	                       payload's header
//	         22      16    nonce: random bytes, new for every stream
//	frame    0       1     kind
//	         1       4     body length n, big-endian, at most the codec's MaxSize
//	         5       n     body
//	         5+n     16    when signed: the frame's tag (see Signing)
//
// The kinds of frame and their bodies (see Bodies):
//
//	'H'  hand-off header  an envelope whose d and c are empty: the data frames
//	                      that follow are the output of stage f, the input of stage t
//	'R'  result header    an envelope whose d and c are empty and whose t equals
//	                      its f: the data frames that follow are the output of
//	                      stage f, the request's final output
//	'D'  data             a chunk, as one element of an envelope's d
//	'X'  error            an error map; ends the stream
//	'E'  end              empty; ends the stream
//
// A stream is the preamble, exactly one header frame, any number of data
// frames whose chunks all have one kind, and exactly one end or error
// frame, then nothing. A stream that stops before its end or error frame is
// truncated (CodeTruncated); bytes after it are refused (CodeBadFrame). The
// writer writes each frame, and the preamble with the header frame, with
// one Write call, so that the HTTP layer can flush once per frame.
//
// # Bodies
//
// Every body is a msgpack map with short string keys. Each value has
// exactly the msgpack type the tables give it: int is any msgpack integer
// encoding of a value that fits in 32 bits; float32 is a msgpack float 32,
// not a float 64; "map x" is a map of table x; "bin of int16" and "bin of
// float32" are bin values holding little-endian int16 or IEEE 754 float32
// elements (defined by this package, not by the reflection encoding of the
// engine types). Unknown and repeated keys are refused. A required key must
// be present; a non-empty one must also hold a value that is not empty
// (not "", not zero bytes, not an empty array). An optional key is written
// only when its value is not empty and may be absent. A chunk map holds
// exactly one of its "one of" keys. Keys are written in table order.
//
// The tables are generated from the schema in schema.go, which also drives
// the encoder and the decoder; TestDocSchema fails when they differ. Their
// columns are the key, the name used in error messages, the msgpack type,
// presence, and the meaning.
//
//	envelope: the body of a payload, and of a stream's header frames
//	  v   version            int                  required   format version, equal to the header's
//	  p   pipeline           str                  non-empty  pipeline name
//	  dg  digest             bin, 32 bytes        non-empty  digest of the pipeline's stages and route
//	  x   transfer_id        str                  non-empty  transfer id, the same along the chain
//	  r   request_id         str                  non-empty  the caller's request id
//	  tp  trace              str                  optional   W3C traceparent of the request
//	  f   from               int                  required   the stage that produced the data
//	  t   to                 int                  required   the stage that must run next
//	  sp  sampling_params    array of nil or bin  required   by stage id: nil, or a JSON object or null
//	  in  prompt             map prompt           required   the request's original input
//	  o   output_modalities  array of str         non-empty  selected output kinds
//	  fs  final_stage        int                  required   the request's final stage
//	  c   carried            array of map output  required   outputs of earlier stages for the answer
//	  d   data               array of map chunk   required   output of stage from, input of stage to
//
//	prompt: the request's input
//	  text  text  str  required  input text
//
//	output: a carried output
//	  s  stage   int                 required  the stage that produced it
//	  k  kind    str                 required  the kind of its chunks
//	  d  chunks  array of map chunk  required  the stage's output, in order
//
//	chunk: one chunk of a stream: exactly one key
//	  t  text      map text      one of  text
//	  f  frames    map frames    one of  acoustic frames
//	  s  segments  map segments  one of  diphone segments
//	  a  audio     map audio     one of  audio
//	  w  words     map words     one of  word timestamps
//
//	text: engine.Text
//	  text  text  str  required  the text
//
//	frames: engine.Frames
//	  voice         voice         str             required  voice
//	  channels      channels      int             required  params per frame
//	  params        params        bin of float32  required  frame params, frame by frame
//	  str_channels  str_channels  int             required  strengths per frame
//	  str           str           bin of float32  required  excitation strengths
//	  frame_shift   frame_shift   float32         required  seconds per frame
//
//	segments: engine.Segments
//	  voice       voice       str             required  voice
//	  names       names       array of str    required  segment names
//	  ends        ends        bin of float32  required  segment end times
//	  cluster     cluster     array of bool   required  cluster flags
//	  target_pos  target_pos  bin of float32  required  pitch target times
//	  target_f0   target_f0   bin of float32  required  pitch target F0s
//
//	audio: engine.Audio
//	  rate     rate             int           required  sample rate, Hz
//	  samples  samples          bin of int16  required  mono samples
//	  eos      end_of_sentence  bool          optional  marks the end of a sentence's audio
//
//	words: engine.Words
//	  words  words  array of map word  required  the words, in order
//
//	word: engine.Word
//	  word        word        str           required  the word: the input's text of its span
//	  char_start  char_start  int           optional  span start in the input, code points
//	  char_end    char_end    int           optional  span end in the input, code points, exclusive
//	  start_ms    start_ms    int           required  start, ms
//	  end_ms      end_ms      int           required  end, ms
//	  spoken      spoken      array of str  optional  the words spoken for the span
//
//	error: the body of a stream's error frame
//	  status   status   int  required   HTTP status, 400..599
//	  code     code     str  required   error code, may be empty
//	  message  message  str  non-empty  what went wrong
//
// # Signing
//
// A Codec with a key signs with GMAC, the tag of AES-256-GCM with no
// plaintext (NIST SP 800-38D), under a key of its own for each payload and
// each stream, derived from the configured key and the payload's or
// stream's random nonce:
//
//	prk      = HKDF-Extract(SHA-256, salt: none, the configured key)
//	K(info)  = HKDF-Expand(SHA-256, prk, info, 32 bytes)
//	tag(K, i, m) = GMAC(K, 12-byte nonce: i big-endian, additional data: m)
//	key id   = HKDF-Expand(SHA-256, prk, "omnistage key id\x00", 8 bytes)
//
// A payload's tag is tag(K("omnistage payload GMAC key\x00" || its 22
// header bytes || its nonce), 0, its header and body). A stream's key is
// K("omnistage stream GMAC key\x00" || its 38 preamble bytes), and frame i
// (the header frame is frame 0) has tag(that key, i, the frame's kind,
// length and body). A key thus never sees a GCM nonce twice, and a frame's
// tag covers the preamble and the frame's place: a frame that is altered,
// reordered, dropped, duplicated or taken from another stream fails its
// tag, so does a stream cut before its end frame (it is refused as
// truncated), and so does a stream whose signed flag was cleared, since a
// keyed reader refuses unsigned streams. GMAC was chosen over HMAC-SHA256
// by measurement: about 4 times as fast on 3.2 KB frames here (0.57 µs
// against 2.3 µs), which is what a hop spends per 100 ms of audio.
//
// A Codec with a key signs every payload and stream and refuses those that
// are unsigned, altered or signed with another key; tags are compared in
// constant time. A Codec without a key writes unsigned payloads and streams
// and reads signed ones without checking their tags: it cannot check them,
// and it accepts unsigned ones anyway. The signature proves the bytes came
// from a server holding the key; it does not hide them. It covers the
// header, so the key id and the issued-at time cannot be changed either;
// a whole payload or stream can still be replayed within its lifetime.
//
// # Keys and expiry
//
// A Codec's keys are a Ring (NewRingCodec; NewCodec makes a ring of one):
// an ordered list whose last key, the newest, signs everything the codec
// writes, and any of whose keys is accepted. The header names the signing
// key by its id, so the reader checks the tag with that key alone, and a
// key id that the reader's ring lacks is refused with CodeKeyUnknown,
// naming the key ids on both sides. The id reveals nothing of the key: it
// is an HKDF output, the same wherever the key is configured (a file, an
// environment variable). Codec.SetRing replaces the ring atomically while
// the codec is in use: what is begun afterwards is signed and checked with
// the new ring, a payload or stream under way keeps the key it started
// with. Rotating keys without refusing anything in flight takes two steps
// on every server: first add the new key as an older key of the ring (it
// is accepted, not yet used), then, once every server holds it, make it
// the newest; the old key can go once nothing it signed is still within
// its lifetime.
//
// Every payload and stream carries the time it was issued, by the
// writer's clock (WithClock). A codec with a lifetime (WithLifetime;
// omnistage serve gives its codec DefaultLifetime unless told otherwise)
// refuses a payload or stream issued longer ago than the lifetime
// (CodeExpired), or more than ClockSkew ahead of its own clock
// (CodeFromFuture); a codec without one, the default, takes any time (a
// coordinator that only passes payloads on has no use for it). A stream
// is checked once, when its header frame arrives, however long it then
// lasts. Each stage issues its own payload, so the lifetime bounds the
// time between one stage's answer and the next stage's call, not a whole
// request. The issued-at time of a signed payload or stream is checked
// only after its tag, so a refusal for expiry is never a forgery's.
//
// # Checks
//
// Unmarshal checks, in order: the size, the magic, the version and flags,
// the key id, the signature, the issued-at time, the msgpack structure,
// then the envelope against the server's Expect: its pipeline and digest,
// the stage ids against the pipeline, that it is addressed to this
// server's stage, its required fields, its sampling_params length, and
// every chunk's structure. Decode first checks the size (before decoding
// the base64) and the base64.
//
// A StreamReader checks the preamble (magic, version, flags, that a keyed
// reader gets a signed stream, the key id), then each frame as it arrives:
// its length against MaxSize before reading its body (whose buffer grows
// only as bytes arrive), its tag, for the header frame the stream's
// issued-at time, its kind against the grammar, then its body: a header
// envelope as Unmarshal checks an envelope (against an Expect when the
// reader has one), a chunk as Unmarshal checks the chunks of an envelope's
// data, an error map for a status in 400..599 and a message.
//
// Every failure of the input is an *Error whose Code says which check
// failed. A StreamReader whose reader fails returns an error that wraps the
// reader's (a truncated stream is an *Error with CodeTruncated that wraps
// io.ErrUnexpectedEOF), so a caller can tell a lost peer from bad input.
//
// # Versioning
//
// FormatVersion versions the payload header, the bodies and the MAC,
// inside payloads and stream header frames alike; StreamVersion versions a
// stream's preamble, framing and tags. A change to a layout, to the
// meaning of a key, to the flags or to the MAC gets a new version; version
// 2 differs from version 1 by the MAC (GMAC with a nonce in the payload,
// where version 1 had HMAC-SHA256) and the optional trace key; version 3
// (stream version 2) adds the key id and the issued-at time to the header
// (the preamble), so payloads and streams of the releases before are
// refused by those after, and the other way round. A server
// reads only its own versions and refuses any other with
// CodeUnsupportedVersion, naming both: stage servers of one deployment run
// the same release, and a request in flight across an upgrade is retried
// from stage 0. The digest does the same for a pipeline's configuration: a
// payload or stream made before the stages or route changed is refused
// with CodeWrongPipeline.
package payload
