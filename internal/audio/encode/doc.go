// Package encode encodes a stream of mono 16-bit PCM into the audio formats
// of OpenAI's speech API, as the samples arrive: New returns an Encoder for
// one response, Write feeds it chunks of any size, Close finishes the file.
//
// The formats, their Content-Type (ContentType) and their encoders:
//
//	mp3   audio/mpeg  LAME (libmp3lame), constant 64 kbit/s
//	opus  audio/opus  Ogg Opus, libopusenc and libopus, VBR 32 kbit/s
//	aac   audio/aac   AAC-LC in ADTS frames, ffmpeg's encoder, 64 kbit/s
//	flac  audio/flac  libFLAC, compression level 5
//	wav   audio/wav   16-bit PCM WAV (audio.AppendWAVHeader)
//	pcm   audio/pcm   raw 16-bit little-endian PCM, no header
//
// The content types are the ones OpenAI's /v1/audio/speech answers with
// (audio/mpeg and audio/aac as its users report them; the others as the
// OpenAI-compatible servers copy them). audio/opus is the type registered
// for Opus in RTP (RFC 7587); an Ogg Opus file's registered type would be
// audio/ogg (RFC 7845), but clients written against OpenAI see audio/opus,
// and browsers play the file under either.
//
// Options.Bitrate changes the lossy formats' bitrate. The defaults are
// common settings for speech; on 16 kHz speech the tests measure an SNR of
// 26 dB for mp3, 41 dB for aac, and a spectral SNR of 26 dB for opus (whose
// waveform SNR says little: it keeps the spectrum, not the phase).
//
// # Sample rates
//
// Any rate from audio.MinRate to audio.MaxRate is taken. mp3 keeps the
// rates MPEG audio carries (8, 11.025, 12, 16, 22.05, 24, 32, 44.1 and 48
// kHz); LAME resamples any other to the next one up (48 kHz above it), and
// rounds the bitrate to the nearest one that MPEG version allows (MPEG-1,
// 32 to 48 kHz: 32 to 320 kbit/s; MPEG-2, 16 to 24 kHz: 8 to 160; MPEG-2.5:
// 8 to 64). opus takes any rate: libopusenc resamples it to Opus's 48 kHz
// and records the input rate in the header, which decoders use. aac keeps
// the MPEG-4 audio rates (7.35 to 96 kHz) and has ffmpeg resample others
// to the next one up. flac, wav and pcm keep the rate.
//
// # Streaming
//
// Every encoder has bounded memory and writes to w during Write as the
// codec completes output, holding back only what the codec needs: mp3 a
// frame or two (LAME's 576-sample delay and bit reservoir), opus at most
// 100 ms (an Ogg page is cut at least that often, instead of libopusenc's
// second) plus 20 ms of input, flac a 4096-sample block (256 ms at 16
// kHz), aac what ffmpeg holds (about 200 ms: the priming frame and its
// input buffering; ffmpeg runs beside the caller, so its output reaches w
// at the next Write or Close, and Write(nil) passes on what is ready).
//
// The output is a function of the samples, not of how they were split
// between Writes: byte for byte, for every format (opus with a fixed
// Options.OggSerial), so a streamed response decodes as the whole-file
// encode does (but for mp3's delay, below). Nothing in a format can go
// back to fix its header, so: wav states the length 0xFFFFFFFF ("to the
// end of the stream") and flac a sample count of 0 (unknown) unless
// Options.TotalSamples gives it, and flac's MD5 signature is 0 (none).
// Whole, which holds the file, puts in the header that only the end can
// complete: mp3's Info tag.
//
// # Encoder delay
//
// Lead says how much later than in the input a decoder plays the
// samples of each format, from the start of the file: 0, but for aac and
// an mp3 stream. Ogg Opus states its pre-skip and exact length, which
// decoders apply. An mp3 file (Whole) starts with LAME's Info tag (Xing's
// frame, with LAME's extension), which states the frame count, LAME's
// encoder delay of 576 samples and the padding of the last frame:
// decoders such as ffmpeg and mpg123 skip the delay with their own 529,
// and mpg123 the padding too. A stream (Options.Stream) cannot state its
// length before it ends, and a tag without it misleads players (a made-up
// frame count is a made-up duration; without one, ffmpeg skips only part
// of the delay and mpg123 none), so it has no tag: decoders play the 1105
// samples of both delays first (69 ms at 16 kHz), and Lead says so; the
// frames after a file's tag are the stream, byte for byte. Below the
// bitrate at which the tag fits in a frame (40 kbit/s at 16 kHz, 64 at 24
// and 48 kHz) a file has no tag either. ADTS cannot state the AAC
// encoder's priming: decoders play its 1024 samples first (64 ms at 16
// kHz). A caller moves the times it reports by Lead, so that they are the
// times at which a player plays them.
//
// # Resources
//
// mp3, opus and flac run in-process through cgo; their C state is freed by
// Close, also after an error, and the Go side is handed to the C callbacks
// through a runtime/cgo.Handle. aac runs one ffmpeg process per encoder,
// started by New (ErrUnavailable without ffmpeg on PATH), with two
// goroutines on its pipes; Close, or a failed Write, ends the process and
// the goroutines and reaps the process. An Encoder must always be closed.
package encode
