// Package acceptance holds user-level acceptance tests and pipeline
// benchmarks. The tests build the omnistage binary and run `omnistage say`
// as a user would, then judge what it wrote with tools that share nothing
// with the pipeline's own checks: PocketSphinx decoding freely with a
// general English language model (sphinx.Recognizer) listens to the audio,
// and the flite command-line program is the reference for durations. The
// benchmarks measure each engine's real-time factor and the whole
// pipeline's, through the orchestrator, and the time to the first audio
// chunk with and without sentence streaming. The OCR recognizer is checked
// to read alike batched or not, in process, in a worker process and on a
// stage server.
//
// The package has no code of its own beyond its tests.
package acceptance
