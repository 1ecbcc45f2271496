//go:build !unix

package stageprog

// Standard input for Serve, where there is no non-blocking one.

import "os"

// Stdin returns os.Stdin.
func Stdin() *os.File { return os.Stdin }
