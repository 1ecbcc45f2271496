// Package defaults fills in the fields of an options struct that its
// caller left unset.
package defaults

import "time"

// Set sets *v to def when *v is zero or negative: a field left unset, or
// a value that cannot mean anything else.
func Set[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
