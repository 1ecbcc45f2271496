package remote

// What the external tests of the package see of its internals.

// Endpoint returns the stage server's base URL.
func (e *Engine) Endpoint() string { return e.endpoint }
