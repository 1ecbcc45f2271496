// Command omnistage serves multi-stage model pipelines. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/omnistage/omnistage/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}, os.Args[1:])
	// The work is done: a late SIGTERM (a parent stopping its worker) must
	// not turn this clean exit into death by signal.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	stop()
	os.Exit(code)
}
