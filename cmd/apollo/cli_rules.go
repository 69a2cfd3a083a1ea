package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/apiclient"
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
	rules.AddCommand(newRulesListCmd(), newRulesApplyCmd())
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
			return runAPI(cmd, &a, (*apiclient.Client).Rules, func(w io.Writer, ans apiclient.RuleSet) error {
				if source {
					_, err := io.WriteString(w, ans.Source)
					return err
				}
				t := newTable(w, "NAME", "KIND", "RULE")
				for _, r := range append(ans.Rules, ans.Inhibits...) {
					// The canonical text is one line; spaces in its strings
					// are part of the rule.
					t.row(r.Name, orDash(r.Kind), r.Text)
				}
				return t.flush()
			})
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
			src, name, err := readFileArg(cmd, args[0], "rules file")
			if err != nil {
				return usageError("%v", err)
			}
			ct := apiclient.RulesText
			if strings.EqualFold(filepath.Ext(name), ".json") {
				ct = apiclient.RulesJSON
			}
			return runAPI(cmd, &a, func(c *apiclient.Client, ctx context.Context) (apiclient.RuleSet, error) {
				ans, err := c.PutRules(ctx, src, ct)
				return ans, ruleErrors(name, err)
			}, func(w io.Writer, ans apiclient.RuleSet) error {
				return say(w, "applied %s: %s\n", components.Escape(name), countRules(len(ans.Rules), len(ans.Inhibits), ""))
			})
		},
	}
	a.register(cmd)
	return cmd
}

// countRules says how many rules and inhibit rules a file has: "2 rules",
// "2 rules (1 rate, 1 event), 1 inhibit rule" (kinds, when given, after
// the rules).
func countRules(n, inhibits int, kinds string) string {
	s := plural(n, "rule") + kinds
	if inhibits > 0 {
		s += ", " + plural(inhibits, "inhibit rule")
	}
	return s
}

// where is "LINE:COL" of a problem, from whichever form the server gave.
func where(p *apiclient.RuleProblem) string {
	if p.Line > 0 {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return p.Pos
}

// ruleErrors rewrites a rejected PUT as one "FILE:LINE:COL: message
// (hint)" line per problem, which editors and CI logs link to the place.
func ruleErrors(file string, err error) error {
	var ae *apiclient.Error
	if !errors.As(err, &ae) || len(ae.Problems) == 0 {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s; nothing was changed", file, plural(max(len(ae.Problems), ae.TotalProblems), "error"))
	if ae.TotalProblems > len(ae.Problems) {
		fmt.Fprintf(&b, "; the first %d are listed", len(ae.Problems))
	}
	for _, p := range ae.Problems {
		b.WriteString("\n" + file)
		if w := where(&p); w != "" {
			b.WriteString(":" + w)
		}
		b.WriteString(": " + p.Message)
		if p.Hint != "" {
			b.WriteString(" (" + p.Hint + ")")
		}
	}
	return &exitError{code: exitFor(ae.Err.Code), err: errors.New(b.String())}
}
