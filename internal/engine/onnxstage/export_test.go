package onnxstage

// Unstacked reports whether e runs each item alone since a shared run's
// outputs did not follow its dimension 0.
func (e *Engine) Unstacked() bool { return e.unstacked.Load() }
