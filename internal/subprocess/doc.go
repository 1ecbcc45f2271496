// Package subprocess holds what the runtime's child processes share,
// whoever starts them (the process placement's workers, the programs of
// external stages): a process group of their own, and their output
// forwarded a line at a time with the child's name, its last lines kept.
package subprocess
