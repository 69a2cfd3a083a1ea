package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/internal/sourcefile"
	"github.com/apollo-11/apollo/rulebook"
	"github.com/apollo-11/apollo/rules"
)

func newRulesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Work with alert rule files",
	}
	var (
		channels []string
		cfgPath  string
	)
	check := &cobra.Command{
		Use:   "check FILE...",
		Short: "Check rule files: every problem with its place, or ok and the rule count",
		Long: `Check alert rule files (docs/rules.md) the way the server will when it loads
them. Every problem is printed as FILE:LINE:COL: message; hint. With no
problem it prints "ok: N rules (M rate, K event), J inhibit rules" (without
the inhibit rules when there are none). "-" reads a file from standard
input. Exit code 0 when every file is good, 1 otherwise.

NOTIFY names are checked against channel names when --channels or --config
gives them; otherwise any name is accepted. --config reads the channel
names of apollo.yaml without needing its secrets in the environment.

A rule may not read metrics older than the server keeps them
(retention.rollups: 24h unless --config says otherwise): a WINDOW longer
than that, or, with pct_change, a WINDOW longer than half of it.

A file of more than 10 000 rules (rate, event and inhibit rules together)
is a problem: the server refuses it through the API (apollo rules apply).`,
		Example: `  apollo rules check rules.txt
  apollo rules check --channels dingtalk,email rules.txt
  apollo rules check --config apollo.yaml rules/*.txt`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			known, kept, err := ruleContext(channels, cfgPath)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if err := oneStdin(files); err != nil {
				return err
			}
			if bad := checkRuleFiles(cmd.InOrStdin(), cmd.OutOrStdout(), files, known, kept); bad > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d problem(s) found", bad)}
			}
			return nil
		},
	}
	check.Flags().StringSliceVar(&channels, "channels", nil, "channel names NOTIFY may use, comma-separated")
	check.Flags().StringVar(&cfgPath, "config", "", "read the channel names from this apollo.yaml")
	cmd.AddCommand(check)
	return cmd
}

// ruleContext returns what rules are checked against: the check for
// NOTIFY names (nil when neither flag names any channels) and how long
// the metrics are kept (the configuration's, or the default).
func ruleContext(list []string, cfgPath string) (known func(string) bool, kept time.Duration, err error) {
	kept = config.Default().Retention.Rollups.D()
	if len(list) == 0 && cfgPath == "" {
		return nil, kept, nil
	}
	names := slices.Clone(list)
	if cfgPath != "" {
		// Secrets are not needed to know channel names: a ${VAR} that is
		// not set reads as a placeholder.
		cfg, err := config.Load(cfgPath, func(name string) string {
			if v := os.Getenv(name); v != "" {
				return v
			}
			return "unset"
		})
		if err != nil {
			return nil, 0, err
		}
		for name := range cfg.Channels {
			names = append(names, name)
		}
		kept = cfg.Retention.Rollups.D()
	}
	return func(name string) bool { return slices.Contains(names, name) }, kept, nil
}

// checkRuleFiles prints every problem of every file, or an ok line per
// good file, and returns the number of problems.
func checkRuleFiles(in io.Reader, out io.Writer, files []string, known func(string) bool, kept time.Duration) int {
	return checkFiles(in, out, files, "rules file", func(file string, src []byte) ([]string, string, error) {
		f, err := rules.ParseFile(file, src)
		var rs []*rules.Rule
		if f != nil {
			rs = f.Rules
		}
		if err == nil && known != nil {
			err = rules.CheckChannels(rs, known)
		}
		if err == nil {
			err = rules.CheckReach(rs, kept)
		}
		var list rules.ErrorList
		if errors.As(err, &list) {
			problems := make([]string, len(list))
			for i, e := range list {
				problems[i] = e.Error()
			}
			return problems, "", nil
		}
		if err != nil {
			return nil, "", err
		}
		if n := len(rs) + len(f.Inhibits); n > rulebook.MaxRules {
			return []string{fmt.Sprintf("%s: %d rules (rate, event and inhibit rules together), over the limit of %d a tenant may have: "+
				"the server refuses the file (apollo rules apply, PUT /api/v1/rules: 413); %s", file, n, rulebook.MaxRules, rulebook.MaxRulesHint)}, "", nil
		}
		event := 0
		for _, r := range rs {
			if r.IsEvent() {
				event++
			}
		}
		return nil, countRules(len(rs), len(f.Inhibits), fmt.Sprintf(" (%d rate, %d event)", len(rs)-event, event)), nil
	})
}

// checkFiles reads each file and checks it with check, which returns the
// file's problems (each a FILE:LINE:COL line), or what an ok line says of
// a good file, or an error that is not about a place in it. It prints the
// problems or the ok line and returns the number of problems.
//
// what names the kind of file ("rules file"): each is read within
// sourcefile.MaxSize, and only a regular file is; "-" is standard input
// (in), named <stdin>, as apply reads it: a file made in a pipe is
// checked before it is applied.
func checkFiles(in io.Reader, out io.Writer, files []string, what string, check func(file string, src []byte) (problems []string, ok string, err error)) int {
	bad := 0
	for _, arg := range files {
		src, file, err := readArg(in, arg, what)
		prefix := ""
		if len(files) > 1 {
			prefix = file + ": "
		}
		if err != nil {
			fmt.Fprintf(out, "%s: cannot read: %v\n", file, unwrapPath(err))
			bad++
			continue
		}
		problems, ok, err := check(file, src)
		switch {
		case err != nil:
			fmt.Fprintf(out, "%s: %v\n", file, err)
			bad++
		case len(problems) > 0:
			for _, p := range problems {
				fmt.Fprintln(out, p)
			}
			bad += len(problems)
		default:
			fmt.Fprintf(out, "%sok: %s\n", prefix, ok)
		}
	}
	return bad
}

// readFileArg reads the file a command names, or standard input for "-",
// within sourcefile.MaxSize; name is how to call it in messages, what
// the kind of file ("rules file").
func readFileArg(cmd *cobra.Command, arg, what string) (src []byte, name string, err error) {
	return readArg(cmd.InOrStdin(), arg, what)
}

// readArg is readFileArg with standard input given.
func readArg(in io.Reader, arg, what string) (src []byte, name string, err error) {
	if arg == "-" {
		if src, err = sourcefile.ReadAll(in, what, sourcefile.MaxSize); err != nil {
			return nil, "<stdin>", &fs.PathError{Op: "read", Path: "<stdin>", Err: err}
		}
		return src, "<stdin>", nil
	}
	src, err = sourcefile.Read(arg, what, sourcefile.MaxSize)
	return src, arg, err
}

// oneStdin refuses a check of standard input twice: the second would
// read nothing and pass as an empty file.
func oneStdin(files []string) error {
	if i := slices.Index(files, "-"); i >= 0 && slices.Contains(files[i+1:], "-") {
		return &exitError{code: exitUsage, err: errors.New(`"-" is named twice: standard input is read once (check it with one "-", and other files by their names)`)}
	}
	return nil
}

// unwrapPath drops the path a read repeats in its error.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
