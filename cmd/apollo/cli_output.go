package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
)

// apiCmd is what every command that talks to a server shares: where the
// server is, and how to print its answer.
type apiCmd struct {
	cf     clientFlags
	output string
}

func (a *apiCmd) register(cmd *cobra.Command) {
	a.cf.register(cmd)
	cmd.Flags().StringVarP(&a.output, "output", "o", "table", "table, or json for the server's JSON answer")
}

// client checks the flags and returns a client for the server.
func (a *apiCmd) client() (*apiclient.Client, error) {
	if a.output != "table" && a.output != "json" {
		return nil, usageError("-o %q: use table or json", a.output)
	}
	return newAPIClient(&a.cf, requestTimeout)
}

func (a *apiCmd) json() bool { return a.output == "json" }

// runAPI is the body of a command that asks the server one thing: it
// makes the client (checking the flags a.client checks), asks, and prints
// the answer: as the server's JSON with -o json, else as text writes it.
// ask may refuse flags of its own command with a usageError: it runs once
// the client is made. It takes the client first, as a method expression
// of the client does ((*apiclient.Client).Rules).
func runAPI[T any](cmd *cobra.Command, a *apiCmd, ask func(*apiclient.Client, context.Context) (T, error), text func(io.Writer, T) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ans, err := ask(c, cmd.Context())
	if err != nil {
		return err
	}
	if a.json() {
		return printAnswer(cmd.OutOrStdout(), ans)
	}
	return text(cmd.OutOrStdout(), ans)
}

// say is fmt.Fprintf for a command's one line of text: it returns only
// the error.
func say(w io.Writer, format string, args ...any) error {
	_, err := fmt.Fprintf(w, format, args...)
	return err
}

// printAnswer prints an answer of the server (an apiclient type) as
// printJSON does: the same JSON as the server's, which encodes the same
// types.
func printAnswer(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as the server writes it
	if err := enc.Encode(v); err != nil {
		return err
	}
	return printJSON(w, buf.Bytes())
}

// printJSON writes a JSON answer indented, as the server sent it, with
// what a terminal would act on escaped (components.Escape): the escapes
// are JSON's, so the output is still the same JSON.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		buf.Reset()
		buf.Write(raw) // not JSON after all: print it as it is, escaped
	}
	_, err := io.WriteString(w, components.EscapeLines(strings.TrimSuffix(buf.String(), "\n"))+"\n")
	return err
}

// table prints aligned columns, two spaces apart; the last column is not
// padded. Widths are counted in terminal cells (lipgloss.Width), as a
// terminal draws them: a CJK character or an emoji takes two, a combining
// accent none. text/tabwriter counted characters, so one Chinese job name
// shifted every column after it on its line.
type table struct {
	w    io.Writer
	rows [][]string
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	if len(header) > 0 {
		t.row(toAny(header)...)
	}
	return t
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// row adds a row; cells are printed with %v and escaped
// (components.Escape), so that one cell can neither break the columns
// (tabs and newlines) nor give the terminal orders.
func (t *table) row(cells ...any) {
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = components.Escape(fmt.Sprint(c))
	}
	t.rows = append(t.rows, r)
}

// flush writes the rows.
func (t *table) flush() error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r[:max(len(r)-1, 0)] {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], lipgloss.Width(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-lipgloss.Width(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	t.rows = nil
	_, err := io.WriteString(t.w, b.String())
	return err
}

// fmtMs prints a Unix-millisecond time in the local zone; "-" for zero.
func fmtMs(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format(time.DateTime)
}

// fmtTime is fmtMs for a time.Time.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

// fmtCost prints a duration in milliseconds the way people read it:
// 850ms, 1.2s, 3m4s; "-" for zero.
func fmtCost(ms float64) string {
	if ms <= 0 {
		return "-"
	}
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// fmtRate prints a rate in [0,1] as a percentage.
func fmtRate(r float64) string {
	if r == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*r)
}

// clip cuts s, escaped, to n terminal cells, marking the cut.
func clip(s string, n int) string {
	if n <= 0 {
		return s
	}
	return components.Truncate(components.Escape(s), n)
}

// orDash is s, or "-" when it is empty, so that a column never looks shifted.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cliCmd makes cmd and its subcommands answer usage mistakes with exit
// code 2 (docs/cli.md): bad flags, the wrong number of arguments, and an
// unknown subcommand. newRootCmd applies it to the whole tree once.
func cliCmd(cmd *cobra.Command) *cobra.Command {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	if cmd.HasSubCommands() && !cmd.Runnable() {
		// A group of commands: alone it shows its help; with a word it
		// does not know, it says so (cobra would show the help and exit 0).
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			return unknownCommand(c, args[0])
		}
	}
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		cliCmd(sub)
	}
	return cmd
}

// unknownCommand is the usage error of a word that names no subcommand
// of c, with the ones it may have meant.
func unknownCommand(c *cobra.Command, word string) error {
	hint := "see " + c.CommandPath() + " --help"
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default
	}
	if s := c.SuggestionsFor(word); len(s) > 0 {
		hint = "did you mean " + strings.Join(s, " or ") + "? " + hint
	}
	return &exitError{code: exitUsage, err: fmt.Errorf("unknown command %q for %q (%s)", word, c.CommandPath(), hint)}
}

// plural is "1 job", "2 jobs".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
