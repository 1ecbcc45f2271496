package process

// What the external tests of the package see of its internals.

// Endpoint returns the base URL the worker listens on.
func (e *Engine) Endpoint() string { return e.url }

// Exited returns a channel closed once the worker process has exited.
func (e *Engine) Exited() <-chan struct{} { return e.exited }

// ExitError returns, once Exited is closed, how the worker process ended:
// nil for a clean exit, else the error of exec.Cmd.Wait.
func (e *Engine) ExitError() error {
	<-e.exited
	return e.exitErr
}
