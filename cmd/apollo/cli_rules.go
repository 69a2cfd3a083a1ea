package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/tui/components"
)

// addRulesServerCmds adds "rules list" and "rules apply", which talk to a
// server, to the root's "rules" command ("rules check", which reads files
// only, lives with the rules engine), making the parent when it is not
// there.
func addRulesServerCmds(root *cobra.Command) {
	var rules *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == "rules" {
			rules = c
		}
	}
	if rules == nil {
		rules = &cobra.Command{Use: "rules", Short: "Alert rules: list and apply the server's", Args: cobra.NoArgs}
		root.AddCommand(rules)
	}
	rules.AddCommand(cliCmd(newRulesListCmd()), cliCmd(newRulesApplyCmd()))
}

// ruleView is one rule as GET /api/v1/rules returns it.
type ruleView struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // rate or event
	Text string `json:"text"`
}

func newRulesListCmd() *cobra.Command {
	var (
		a      apiCmd
		source bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the server's alert rules",
		Long: `List the rules the server evaluates, one per line, in their text form.
--source prints the whole rules file as the server holds it, comments
included, ready to edit and "apollo rules apply".

Exit codes: 0 ok, 1 server unreachable or failing, 4 the token may not read
rules.`,
		Example: `  apollo rules list
  apollo rules list --source > rules.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var ans struct {
				Rules  []ruleView `json:"rules"`
				Source string     `json:"source"`
			}
			raw, err := c.get(cmd.Context(), "/api/v1/rules", nil, &ans)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case a.json():
				return printJSON(out, raw)
			case source:
				_, err := io.WriteString(out, ans.Source)
				return err
			}
			t := newTable(out, "NAME", "KIND", "RULE")
			for _, r := range ans.Rules {
				t.row(r.Name, orDash(r.Kind), strings.Join(strings.Fields(r.Text), " "))
			}
			return t.flush()
		},
	}
	a.register(cmd)
	cmd.Flags().BoolVar(&source, "source", false, "print the rules file as the server holds it")
	return cmd
}

func newRulesApplyCmd() *cobra.Command {
	var a apiCmd
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Replace the server's alert rules with a file's (checked first)",
		Long: `Send a whole rules file (text, or JSON for a .json file) to the server. The
server checks every rule and its channels first: on any error nothing
changes, and every error is printed as FILE:LINE:COL: message. Needs the
admin role; audited. "-" reads the file from standard input.

Exit codes: 0 applied, 1 server unreachable or failing, 2 the file has
errors, 4 the token lacks the admin role.`,
		Example: `  apollo rules check rules.txt && apollo rules apply rules.txt
  apollo rules list --source | sed 's/0.05/0.10/' | apollo rules apply -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			var (
				src []byte
				err error
			)
			if name == "-" {
				src, err = io.ReadAll(cmd.InOrStdin())
				name = "<stdin>"
			} else {
				src, err = os.ReadFile(name)
			}
			if err != nil {
				return usageError("%v", err)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ct := "text/plain; charset=utf-8"
			if strings.EqualFold(filepath.Ext(name), ".json") {
				ct = "application/json"
			}
			raw, err := c.call(cmd.Context(), http.MethodPut, "/api/v1/rules", nil, bytes.NewReader(src), ct)
			if err != nil {
				return ruleErrors(name, err)
			}
			if a.json() {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			var ans struct {
				Rules []json.RawMessage `json:"rules"`
			}
			_ = json.Unmarshal(raw, &ans)
			fmt.Fprintf(cmd.OutOrStdout(), "applied %s: %s\n", components.Escape(name), plural(len(ans.Rules), "rule"))
			return nil
		},
	}
	a.register(cmd)
	return cmd
}

// ruleError is one problem the server found in a rules file.
type ruleError struct {
	Pos     json.RawMessage `json:"pos"`
	Line    int             `json:"line"`
	Col     int             `json:"col"`
	Message string          `json:"message"`
	Hint    string          `json:"hint"`
}

// where is "LINE:COL" from whichever form the server gave the position in.
func (e *ruleError) where() string {
	if e.Line > 0 {
		return fmt.Sprintf("%d:%d", e.Line, e.Col)
	}
	var s string
	if json.Unmarshal(e.Pos, &s) == nil && s != "" {
		return s
	}
	var p struct {
		Line   int `json:"line"`
		Col    int `json:"col"`
		Column int `json:"column"`
	}
	if json.Unmarshal(e.Pos, &p) == nil && p.Line > 0 {
		return fmt.Sprintf("%d:%d", p.Line, max(p.Col, p.Column))
	}
	return ""
}

// ruleErrors rewrites a rejected PUT as one "FILE:LINE:COL: message
// (hint)" line per error, which editors and CI logs link to the place.
func ruleErrors(file string, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err
	}
	var ans struct {
		Errors []ruleError `json:"errors"`
	}
	if json.Unmarshal(ae.body, &ans) != nil || len(ans.Errors) == 0 {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s; nothing was changed", file, plural(len(ans.Errors), "error"))
	for _, e := range ans.Errors {
		b.WriteString("\n" + file)
		if w := e.where(); w != "" {
			b.WriteString(":" + w)
		}
		b.WriteString(": " + e.Message)
		if e.Hint != "" {
			b.WriteString(" (" + e.Hint + ")")
		}
	}
	return &exitError{code: exitFor(ae.status), err: errors.New(b.String())}
}
