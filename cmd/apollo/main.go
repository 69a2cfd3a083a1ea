// Command apollo is Apollo-11's single binary: the server, its three
// processes, the scheduler, the CLI and the terminal dashboard.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/apollo-11/apollo/tui/components"
)

func main() {
	os.Exit(Main())
}

// Main runs the binary with the process's arguments and returns its exit
// code. Tests call it through testscript.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// exitError carries an exit code other than 1 out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	err = cliFailure(err)
	// A message may repeat what a server was asked for or holds (a task
	// ID, a job name): escaped, like every other output.
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "apollo:", components.EscapeLines(ee.err.Error()))
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "apollo:", components.EscapeLines(err.Error()))
	return 1
}
