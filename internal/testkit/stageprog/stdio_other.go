//go:build !unix

package stageprog

// Standard input and output for Serve, where there are no non-blocking
// ones.

import "os"

// Stdin returns os.Stdin.
func Stdin() *os.File { return os.Stdin }

// Stdout returns os.Stdout.
func Stdout() *os.File { return os.Stdout }
