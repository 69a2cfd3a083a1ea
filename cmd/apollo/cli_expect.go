package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/expect"
	"github.com/apollo-11/apollo/tui/components"
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
"-" reads a file from standard input.

Exit codes: 0 every file is good, 1 a problem, 2 a mistake in the command
line.`,
		Example: `  apollo expect check expectations.yaml`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := oneStdin(files); err != nil {
				return err
			}
			if bad := checkExpectFiles(cmd.InOrStdin(), cmd.OutOrStdout(), files); bad > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d problem(s) found", bad)}
			}
			return nil
		},
	})
	cmd.AddCommand(newExpectShowCmd(), newExpectApplyCmd(), newExpectSuggestCmd())
	return cmd
}

func newExpectShowCmd() *cobra.Command {
	var a apiCmd
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the server's expectations file for this token's tenant",
		Long: `Print the job expectations file the server holds for the token's tenant,
ready to edit and "apollo expect apply".

Exit codes: 0 ok, 1 server unreachable or failing, 4 the token may not read.`,
		Example: `  apollo expect show > expectations.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAPI(cmd, &a, (*apiclient.Client).Expectations, func(w io.Writer, ans apiclient.Expectations) error {
				_, err := io.WriteString(w, ans.Source)
				return err
			})
		},
	}
	a.register(cmd)
	return cmd
}

func newExpectApplyCmd() *cobra.Command {
	var a apiCmd
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Replace the server's expectations with a file's (checked first)",
		Long: `Send a whole expectations file to the server. The server checks it first:
on any problem nothing changes, and every problem is printed as
FILE:LINE:COL: message. Needs the operator role; audited. "-" reads the
file from standard input.

Exit codes: 0 applied, 1 server unreachable or failing, 2 the file has
problems, 4 the token lacks the operator role.`,
		Example: `  apollo expect check expectations.yaml && apollo expect apply expectations.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, name, err := readFileArg(cmd, args[0], "expectations file")
			if err != nil {
				return usageError("%v", err)
			}
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.Expectations, error) {
				ans, err := c.PutExpectations(ctx, src)
				return ans, ruleErrors(name, err)
			}, func(w io.Writer, ans apiclient.Expectations) error {
				return say(w, "applied %s: %s\n", components.Escape(name), plural(ans.Count, "expectation"))
			})
		},
	}
	a.register(cmd)
	return cmd
}

func newExpectSuggestCmd() *cobra.Command {
	var (
		a      apiCmd
		accept bool
	)
	cmd := &cobra.Command{
		Use:   "suggest [JOB]",
		Short: "Show what the server learned of a job's schedule and runtimes; --accept makes it the job's expectation",
		Long: `Show the expectation the server proposes for JOB (or for every job it has
a proposal for) from the job's recent runs: its schedule or period, a
grace and runtime bounds, with how sure it is (docs/expectations.md).
Nothing is enforced until accepted: --accept (operator role, audited)
makes the proposal JOB's expectation in one call.

Exit codes: 0 ok, 1 server unreachable or failing, 2 --accept without
JOB, 3 no proposal for JOB, 4 the token lacks the role.`,
		Example: `  apollo expect suggest
  apollo expect suggest nightly_backup
  apollo expect suggest nightly_backup --accept`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			job := ""
			if len(args) == 1 {
				job = args[0]
			}
			if accept && job == "" {
				return usageError("--accept needs the JOB whose proposal to accept")
			}
			if accept {
				return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.Expectations, error) {
					return c.AcceptSuggestion(ctx, job)
				}, func(w io.Writer, ans apiclient.Expectations) error {
					return say(w, "accepted: %s now has the proposed expectation (%s in all)\n", components.Escape(job), plural(ans.Count, "expectation"))
				})
			}
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.SuggestionList, error) {
				return c.SuggestionList(ctx, job)
			}, func(w io.Writer, l apiclient.SuggestionList) error {
				if job != "" && len(l.Suggestions) == 0 {
					return &exitError{code: 3, err: fmt.Errorf("no proposal for %s yet (it needs about 10 runs)", components.Escape(job))}
				}
				t := newTable(w, "JOB", "PROPOSAL", "CONFIDENCE", "RUNS", "GRACE", "MAX_RUNTIME", "MIN_RUNTIME")
				for _, s := range l.Suggestions {
					t.row(s.Job, orDash(s.Describe), fmt.Sprintf("%.2f", s.Confidence), fmt.Sprint(s.Runs), orDash(s.Grace), orDash(s.MaxRuntime), orDash(s.MinRuntime))
				}
				if err := t.flush(); err != nil || !l.More {
					return err
				}
				return say(w, "more jobs have proposals than the %d listed (the first by name): name one, apollo expect suggest JOB\n", len(l.Suggestions))
			})
		},
	}
	a.register(cmd)
	cmd.Flags().BoolVar(&accept, "accept", false, "make the proposal JOB's expectation (operator role)")
	return cmd
}

// checkExpectFiles prints every problem of every file, or an ok line per
// good file, and returns the number of problems.
func checkExpectFiles(in io.Reader, out io.Writer, files []string) int {
	return checkIssueFiles(in, out, files, "expectations file", func(file string, src []byte) (string, error) {
		set, err := expect.Parse(file, src)
		if err != nil {
			return "", err
		}
		return plural(set.Len(), "expectation"), nil
	})
}

// checkIssueFiles is checkFiles for the files whose parser reports every
// problem at once as an *expect.FileError (expectations, jobs): parse
// returns what the ok line says of a good file.
func checkIssueFiles(in io.Reader, out io.Writer, files []string, what string, parse func(file string, src []byte) (string, error)) int {
	return checkFiles(in, out, files, what, func(file string, src []byte) ([]string, string, error) {
		ok, err := parse(file, src)
		var fe *expect.FileError
		if errors.As(err, &fe) {
			problems := make([]string, len(fe.Issues))
			for i, is := range fe.Issues {
				problems[i] = is.Error()
			}
			return problems, "", nil
		}
		return nil, ok, err
	})
}
