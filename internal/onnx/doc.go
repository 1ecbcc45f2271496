// Package onnx is omnistage's one owner of ONNX Runtime: it loads the
// library, opens models as sessions with their threads, checks tensors
// against a model and runs it. A model engine is a small package on top:
// it opens a Session in Warm, turns a request into tensors, calls Run and
// turns the outputs into its answer.
//
// # Lifecycle
//
// The library is loaded once per process, by the first Load or Open, from
// LibraryPath: a stage's option, else $OMNISTAGE_ONNXRUNTIME, else
// DefaultLibrary, where scripts/install-deps.sh and the image put it. It
// stays loaded until the process exits; loading another file later in the
// same process is an error that names both.
//
// A Session is one model with its own thread pool (Options: one intra-op
// and one inter-op thread unless set, so that replicas, not threads, take
// the cores): an engine opens one per replica in Warm and closes it in
// Close. Its inputs and outputs (Inputs, Outputs: names, element types,
// shapes with Any for an open dimension) are read when it opens, and
// Declare checks a stage's declaration against them.
//
// # Concurrency
//
// Run may be called from several goroutines at once: ONNX Runtime's runs
// of one session are safe together, and they share the session's threads.
// Close waits for the runs in progress and makes later ones return
// ErrClosed. Load, Open and the batch helpers are safe to call
// concurrently.
//
// # Buffers
//
// Run reads its inputs' data in place (no copy, unless a tensor's data is
// not aligned to its element size) and keeps no reference to it after it
// returns; the caller must not modify it during the call. Each output is
// memory that nothing else references: the caller owns it, may keep it as
// long as it likes, and, sending it as a chunk, must treat it as immutable
// like every chunk. Output memory comes from a pool of buffers by size:
// the first run with given input shapes lets ONNX Runtime size the outputs
// (the binding copies them out of its arena), and later runs with the same
// input shapes hand it pooled buffers of the shapes that run gave to
// compute into. A caller that is done with outputs it kept to itself (an
// engine that decodes them into its answer) gives them back with Recycle,
// and runs then allocate nothing for them. Split's parts share their
// tensor's memory; Stack's result comes from the same pool.
//
// # Batches
//
// A model whose dimension 0 is its batch can run several requests' items
// at once: check each request's tensors with CheckInputs (so that one bad
// request fails alone), Stack them along dimension 0, padding a dimension
// of varying size (the width of text-line crops) to the largest, Run the
// batch, and Split each output back by Sizes.
//
// # Errors
//
// Input the model cannot take (another element type, rank or fixed
// dimension, data that does not match its shape, an empty batch, NaN or
// infinity) is refused by Run before ONNX Runtime sees it, as an
// *engine.InputError naming the tensor: the caller's fault. A failure
// inside ONNX Runtime's run is a *RunError naming the model: the server's.
// A library or model file that is missing or cannot be loaded is an error
// naming the file.
//
// # Cancellation
//
// Run checks its context before it starts, and when the context ends
// during the run ONNX Runtime stops at the end of the graph node it is
// computing (one node is not interrupted); Run then returns an error
// wrapping the context's cause, not a *RunError. An engine running one
// batch for several requests passes a context that ends when the batch is
// no longer wanted, not one request's.
package onnx
