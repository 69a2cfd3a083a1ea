package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/expect"
)

func newExpectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "expect",
		Short: "Job expectations: check files, see the learner's proposals",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "check FILE...",
		Short: "Check expectations files: every problem with its place, or ok and the count",
		Long: `Check job expectations files (docs/expectations.md) the way the server will
when it loads them. Every problem is printed as FILE:LINE:COL: job "NAME":
field: message (hint). With no problem it prints "ok: N expectations".

Exit codes: 0 every file is good, 1 a problem, 2 a mistake in the command
line.`,
		Example: `  apollo expect check expectations.yaml`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if bad := checkExpectFiles(cmd.OutOrStdout(), files); bad > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d problem(s) found", bad)}
			}
			return nil
		},
	})
	return cmd
}

// checkExpectFiles prints every problem of every file, or an ok line per
// good file, and returns the number of problems.
func checkExpectFiles(out io.Writer, files []string) int {
	bad := 0
	for _, file := range files {
		prefix := ""
		if len(files) > 1 {
			prefix = file + ": "
		}
		src, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintf(out, "%s: cannot read: %v\n", file, unwrapPath(err))
			bad++
			continue
		}
		set, err := expect.Parse(file, src)
		var fe *expect.FileError
		switch {
		case errors.As(err, &fe):
			for _, i := range fe.Issues {
				fmt.Fprintln(out, i.Error())
			}
			bad += len(fe.Issues)
		case err != nil:
			fmt.Fprintf(out, "%s: %v\n", file, err)
			bad++
		default:
			fmt.Fprintf(out, "%sok: %s\n", prefix, plural(set.Len(), "expectation"))
		}
	}
	return bad
}
