package main

// Every apollo command line the newcomer's pages print names a command and
// flags the binary has: a page that says `apollo rules set` or `--listen`
// where the command has neither sends its reader to an error.

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// newcomerPages are the pages a newcomer reads and runs from.
var newcomerPages = []string{
	"README.md", "README.zh-CN.md",
	"docs/protocol.md", "docs/cli.md", "docs/rules.md", "docs/notifications.md",
	"docs/tui.md", "docs/dashboard.md", "docs/monitoring.md", "docs/stream.md",
	"examples/README.md", "examples/python/README.md", "examples/shell/README.md",
}

// deliberateMistakes are the command lines the pages print to show how
// the binary answers a mistake.
var deliberateMistakes = []string{"apollo bogus", "apollo server --listn"}

func TestDocsNameRealCommandsAndFlags(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultHelpFlag()
	checked := 0
	for _, page := range newcomerPages {
		src, err := os.ReadFile(exRepoFile(t, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range codeLines(string(src)) {
			if containsAny(line, deliberateMistakes) || errorOutput.MatchString(line) {
				continue
			}
			words := shellWords(line)
			for i, w := range words {
				if w != "apollo" && w != "./apollo" && w != "./cmd/apollo" && !strings.HasSuffix(w, "bin/apollo") {
					continue
				}
				if problem, ok := checkCommandLine(root, words[i+1:]); ok {
					checked++
				} else if problem != "" {
					t.Errorf("%s: %q: %s", page, line, problem)
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("checked %d apollo command lines; did the pages or the parsing change?", checked)
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// errorOutput is a line the binary prints on stderr ("apollo: ...",
// "apollo exec: ..."): its hints name commands in prose.
var errorOutput = regexp.MustCompile(`^\s*apollo( [a-z]+)?: `)

// codeLines returns the lines of a markdown page that are code: those of
// fenced and indented blocks, and every code span of the prose.
func codeLines(md string) []string {
	var out []string
	fence := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			fence = !fence
		case fence, strings.HasPrefix(line, "    ") && !strings.HasPrefix(strings.TrimSpace(line), "-"):
			out = append(out, line)
		default:
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// shellWords splits a line as a shell would, well enough for the pages:
// quotes group words, and the operators |, ;, &&, ||, >, < and a comment
// end a command (they become words of their own).
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	in := false
	var quote rune
	flush := func() {
		if in {
			words = append(words, cur.String())
		}
		cur.Reset()
		in = false
	}
	line = strings.ReplaceAll(line, `\|`, "|") // a table cell's escaped pipe
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			flush()
		case strings.ContainsRune("|;&><()#", r):
			flush()
			words = append(words, string(r))
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	flush()
	return words
}

// checkCommandLine walks the words after "apollo" through the command
// tree. It answers ok when they name a command and flags it has, and a
// problem when they do not; neither when the words are not a command
// line (prose that names the program, an error message's "apollo:").
func checkCommandLine(root *cobra.Command, words []string) (problem string, ok bool) {
	cmd, positional := root, 0
	for i := 0; i < len(words); i++ {
		w := words[i]
		if len(w) == 1 && strings.Contains("|;&><()#", w) {
			break
		}
		if w == "--" || w == "\\" || w == "..." || w == "…" { // the command's own words, a continued line, an elision
			break
		}
		if strings.HasPrefix(w, "-") && len(w) > 1 {
			name := strings.TrimLeft(strings.SplitN(w, "=", 2)[0], "-")
			if name == "help" || name == "h" { // every command's, added as it runs
				continue
			}
			f := cmd.Flag(name)
			if !strings.HasPrefix(w, "--") {
				f = cmd.Flags().ShorthandLookup(w[1:2])
				if f == nil {
					f = cmd.InheritedFlags().ShorthandLookup(w[1:2])
				}
			}
			if f == nil {
				return cmd.CommandPath() + " has no flag " + w, false
			}
			if f.NoOptDefVal == "" && !strings.Contains(w, "=") {
				i++ // its value
			}
			continue
		}
		end := strings.HasSuffix(w, ":") // "apollo exec: ..." names the command in a message
		w = strings.TrimSuffix(w, ":")
		if cmd == root && !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(w) {
			return "", false // "apollo (devel)", "apollo.yaml"
		}
		if positional == 0 {
			if sub, _, err := cmd.Find([]string{w}); err == nil && sub != cmd {
				cmd = sub
				if end {
					break
				}
				continue
			}
		}
		// A command whose usage line names no argument takes none: a
		// group's word that is not one of its commands, or a word too many.
		if strings.TrimSpace(cmd.Use) == cmd.Name() {
			if cmd.HasSubCommands() {
				return cmd.CommandPath() + " has no command " + w, false
			}
			return cmd.CommandPath() + " takes no argument " + w, false
		}
		positional++
		if end {
			break
		}
	}
	return "", cmd != root
}

// The checker itself: it finds the mistakes it is there for, and passes
// the lines the pages print.
func TestCheckCommandLine(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	for _, tc := range []struct {
		line    string
		problem string // "" for a good line
	}{
		{"apollo rules set", "apollo rules has no command set"},
		{"apollo tasks --listen :1969", "apollo tasks has no flag --listen"},
		{"apollo jobs -x", "apollo jobs has no flag -x"},
		{"apollo status now", "apollo status takes no argument now"},
		{"apollo tasks --prefix batch_ --status failed --since 24h -o json | jq .", ""},
		{"apollo rules list --source | sed 's/a > 1/a > 2/' | apollo rules apply -", ""},
		{"apollo job --window 24h -- list", ""},
		{"apollo exec --name x --timeout 2h -- ./backup.sh --full", ""},
		{"go run ./cmd/apollo demo", ""},
		{"source <(apollo completion bash)", ""},
		{"apollo silence add --comment \"vendor outage --for ever\" --for 2h --rule r", ""},
	} {
		var problems []string
		words := shellWords(tc.line)
		for i, w := range words {
			if w == "apollo" || w == "./cmd/apollo" {
				if p, _ := checkCommandLine(root, words[i+1:]); p != "" {
					problems = append(problems, p)
				}
			}
		}
		if got := strings.Join(problems, "; "); got != tc.problem {
			t.Errorf("%q: %q, want %q", tc.line, got, tc.problem)
		}
	}
}
