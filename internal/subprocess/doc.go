// Package subprocess holds what the runtime's child processes share,
// whoever starts them (the process placement's workers, the programs of
// external stages): a process group of their own, and their output
// forwarded a line at a time with the child's name, its last lines kept.
// Start is the one launcher of stage programs, so that the conformance
// check (package stagecheck) runs a program exactly as the runtime
// (package engine/external) does.
package subprocess
