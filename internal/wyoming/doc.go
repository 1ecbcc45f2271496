// Package wyoming serves the text-to-speech side of the Wyoming protocol
// (Home Assistant's protocol for voice services) over a server's
// pipelines, beside the HTTP API: omnistage serve --wyoming ADDR.
//
// # Framing
//
// An event is a JSON header line (type, data, data_length,
// payload_length, version), then data_length bytes of JSON data merged
// over the header's data, then payload_length bytes of payload. Every
// event the server writes carries version ProtocolVersion and its data in
// the data section. The reader bounds the header line, the data and the
// payload (Options); an event over a bound is read past and refused.
//
// # Events
//
//	describe                  → info: one tts program, supports_synthesize_streaming true,
//	                            whose voices are the talkers' (see below)
//	synthesize {text, voice}  → audio-start {rate, width 2, channels 1},
//	                            audio-chunk {rate, width, channels, timestamp} + 16-bit PCM
//	                            as the pipeline makes it (at most 100 ms each), audio-stop
//	synthesize-start {voice}, synthesize-chunk {text} ..., synthesize-stop
//	                          → per sentence: audio-start, audio-chunk ..., audio-stop;
//	                            then synthesize-stopped
//	ping {text}               → pong {text}
//
// A synthesize inside a stream is the copy of the whole text that
// clients send for older servers, and is ignored. An event of any other
// type is ignored.
//
// # Voices and pipelines
//
// The info lists the voices of every pipeline that takes text and makes
// audio: the default pipeline's by their own names (slt), the others'
// prefixed with their pipeline's name (tts-24k/slt). A synthesis's voice
// picks its pipeline and voice: by name (a pipeline's name alone is its
// talker's default voice), else by language (the first voice that speaks
// it), else the default pipeline's default voice.
//
// # Errors
//
// An event that cannot be read, whose data does not fit its type, or that
// comes out of its place (a synthesize-chunk outside a stream) is answered
// with an error event {text, code} (CodeMalformed, CodeUnexpected) and the
// connection goes on as if it had not come; only a header whose lengths
// are not lengths, after which nothing can be framed, ends it. A synthesis
// that fails (an unknown voice, text over the limit, a pipeline that
// refuses or fails it) is answered with an error event whose code is the
// HTTP API's for the same failure, and the connection then closes: that
// is how the reference server ends a failed synthesis, and a client
// waiting for its audio-stop or synthesize-stopped learns at once.
//
// # Limits
//
// Connections at once (MaxConns), the time between events (IdleTimeout),
// each write (WriteTimeout: a client that stops reading pushes back into
// the pipeline, whose buffers are bounded, and is cut off after it), a
// connection's life (MaxSession), an event's parts and a synthesis's text
// are all bounded.
//
// # Security
//
// Wyoming has no authentication: whoever reaches the port can make the
// server speak. The command line listens on loopback unless told
// otherwise.
package wyoming
