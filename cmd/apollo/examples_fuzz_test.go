package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// FuzzShellReporterReadsAnswers feeds the shell reporter's answer reader
// (its functions messages and field, taken from the script as written)
// answers as the server writes them, with any field, message and hint,
// and checks that it prints each error whole, as "FIELD: MESSAGE (HINT)",
// and reads the tallies. Each input runs sh once: the seeds run on every
// test run; -fuzz explores further, slowly.
func FuzzShellReporterReadsAnswers(f *testing.F) {
	f.Add("taskID", `".." cannot be named in a URL`, "use a name", 3)
	f.Add("", "over this token's limit {of} 5 events per second", "", 0)
	f.Add("extra", "\\\"\t\n\x01 <&> é \u2028", "a \"hint\"", 1)
	f.Add("status", `unknown status "}{"`, `"rejected": 9`, 12)
	f.Fuzz(func(t *testing.T, field, message, hint string, rejected int) {
		if !utf8.ValidString(field + message + hint) {
			return // the server writes UTF-8 (invalid bytes as U+FFFD)
		}
		sh, script := shellEx(t)
		fns := shellFunctions(t, script, "field", "messages")
		e := &apollo.Error{Code: apollo.EINVALID, Field: field, Message: message, Hint: hint}
		answer := map[string]any{
			"results":  []any{map[string]any{"result": "accepted"}, map[string]any{"result": "rejected", "error": e}},
			"accepted": 1, "rejected": rejected, "error": e,
		}
		var body bytes.Buffer
		enc := json.NewEncoder(&body)
		enc.SetEscapeHTML(rejected%2 == 0) // the server's writers do both
		if err := enc.Encode(answer); err != nil {
			t.Fatal(err)
		}
		work := t.TempDir()
		if err := os.WriteFile(filepath.Join(work, "answer"), body.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(sh, "-c", fns+"\nfield rejected; messages", "sh")
		cmd.Env = append(os.Environ(), "work="+work)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		want := printed(message)
		if field != "" {
			want = printed(field) + ": " + want
		}
		if hint != "" {
			want += " (" + printed(hint) + ")"
		}
		tally := ""
		if rejected >= 0 { // field reads whole numbers only
			tally = strconv.Itoa(rejected) + "\n"
		}
		if got, exp := string(out), tally+strings.Repeat(want+"\n", 2); got != exp {
			t.Fatalf("answer %s\nprinted %q\nwant    %q", body.Bytes(), got, exp)
		}
	})
}

// printed is s as the shell reporter prints it: control characters as
// spaces (a reason stays one line), U+2028 and U+2029 as their escapes.
func printed(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 {
			return ' '
		}
		return r
	}, strings.NewReplacer("\u2028", `\u2028`, "\u2029", `\u2029`).Replace(s))
}

// shellFunctions returns the definitions of the named functions of a
// shell script, as written there (each from "NAME() {" to the first line
// "}", or on one line).
func shellFunctions(t *testing.T, script string, names ...string) string {
	t.Helper()
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range names {
		lines := strings.Split(string(src), "\n")
		found := false
		for i, l := range lines {
			if !strings.HasPrefix(l, name+"() {") {
				continue
			}
			found = true
			if strings.HasSuffix(l, "}") {
				out = append(out, l)
				break
			}
			for j := i; j < len(lines); j++ {
				out = append(out, lines[j])
				if lines[j] == "}" {
					break
				}
			}
			break
		}
		if !found {
			t.Fatalf("no function %s in %s", name, script)
		}
	}
	return strings.Join(out, "\n")
}
