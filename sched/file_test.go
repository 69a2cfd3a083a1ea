package sched

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

// docExample returns the first ```yaml block of docs/scheduler.md, so that
// the documented jobs file is held to the parser and cannot rot.
func docExample(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "scheduler.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/scheduler.md has no ```yaml block")
	}
	return []byte(block)
}

func TestParseDocumentedExample(t *testing.T) {
	t.Parallel()
	f, err := Parse("scheduler.md", docExample(t))
	if err != nil {
		t.Fatalf("the documented jobs file does not parse:\n%v", err)
	}
	set, issues := f.compile()
	if len(issues) > 0 {
		t.Fatal(issues)
	}
	// The example is meant to show every option: make sure it still does.
	fields := regexp.MustCompile(`(?m)^\s+-?\s*([a-z_]+):`).FindAllStringSubmatch(string(docExample(t)), -1)
	seen := map[string]bool{}
	for _, m := range fields {
		seen[m[1]] = true
	}
	for _, want := range strings.Split(knownFields("sched.Job"), ", ") {
		if !seen[want] {
			t.Errorf("the documented jobs file does not show the field %q", want)
		}
	}
	b := set.byName["nightly_backup"]
	if b == nil || b.timeout != 30*time.Minute || b.retries != 2 || b.loc.String() != "Europe/Berlin" || b.policy != ConcurrencyForbid {
		t.Errorf("nightly_backup compiled to %+v", b)
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	src := `
defaults:
  timezone: Asia/Shanghai
  timeout: 10m
  retries: 1
  concurrency: allow
  late_after: 2m
jobs:
  - name: inherits
    schedule: "@hourly"
    shell: "true"
  - name: overrides
    schedule: "@hourly"
    timezone: UTC
    timeout: 0
    retries: 0
    concurrency: replace
    late_after: 0s
    catchup: skip
    command: ["true"]
`
	f, err := Parse("d.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := f.compile()
	in, ov := set.byName["inherits"], set.byName["overrides"]
	if in.loc.String() != "Asia/Shanghai" || in.timeout != 10*time.Minute || in.retries != 1 || in.policy != ConcurrencyAllow ||
		in.lateAfter != 2*time.Minute || in.catchup != CatchupOnce || in.killGrace != defaultKillGrace || in.backoff != defaultRetryBackoff {
		t.Errorf("inherits = %+v", in)
	}
	if ov.loc != time.UTC || ov.timeout != 0 || ov.retries != 0 || ov.policy != ConcurrencyReplace || ov.lateAfter != 0 || ov.catchup != CatchupSkip {
		t.Errorf("overrides = %+v", ov)
	}
	if strings.Join(in.argv, " ") != "/bin/sh -c true" {
		t.Errorf("shell argv = %q", in.argv)
	}
}

func TestParseEmpty(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"", "# nothing yet\n", "jobs: []\n"} {
		f, err := Parse("e.yaml", []byte(src))
		if err != nil || len(f.Jobs) != 0 {
			t.Errorf("Parse(%q) = %v, %v; want an empty file", src, f, err)
		}
	}
}

const okJob = "    schedule: \"* * * * *\"\n    command: [x]\n"

// parseErrorCases are jobs files with problems, and the lines of the error
// that Parse must return for each, in order.
var parseErrorCases = []struct {
	name string
	src  string
	want []string // one line of the error each, in order
}{
	{"unknown field", "jobs:\n  - name: a\n" + okJob + "    colour: red\n",
		[]string{`t.yaml:5:5: job "a": colour: unknown field (known fields are name, schedule,`}},
	{"unknown top-level field", "job:\n  - name: a\n",
		[]string{`t.yaml:1:1: job: unknown field (known fields are defaults, jobs)`}},
	{"unknown defaults field", "defaults:\n  tz: UTC\njobs: []\n",
		[]string{`t.yaml:2:3: tz: unknown field (known fields are timezone, timeout,`}},
	{"missing name", "jobs:\n  - schedule: \"* * * * *\"\n    command: [x]\n",
		[]string{`t.yaml:2:5: name: missing (every job needs a unique name`}},
	{"bad name", "jobs:\n  - name: \"a b\"\n" + okJob,
		[]string{`t.yaml:2:11: name: "a b" is not a usable job name`}},
	{"duplicate name", "jobs:\n  - name: a\n" + okJob + "  - name: a\n" + okJob,
		[]string{`t.yaml:5:11: job "a": name: name already used by the job at line 2`}},
	{"bad cron", "jobs:\n  - name: a\n    schedule: \"61 * * * *\"\n    command: [x]\n",
		[]string{`t.yaml:3:15: job "a": schedule: "61 * * * *": minute field "61": "61" is not a number from 0 to 59`}},
	{"bad timezone", "jobs:\n  - name: a\n" + okJob + "    timezone: Mars/Olympus\n",
		[]string{`t.yaml:5:15: job "a": timezone: unknown timezone "Mars/Olympus"`}},
	{"both command and shell", "jobs:\n  - name: a\n" + okJob + "    shell: ls\n",
		[]string{`t.yaml:4:14: job "a": command: both command and shell are set`}},
	{"neither command nor shell", "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n",
		[]string{`t.yaml:2:5: job "a": command: neither command nor shell is set`}},
	{"empty program", "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [\"\"]\n",
		[]string{`t.yaml:4:14: job "a": command: the program name is empty`}},
	{"schedule and after", "jobs:\n  - name: a\n" + okJob + "  - name: b\n" + okJob + "    after: [a]\n",
		[]string{`t.yaml:6:15: job "b": schedule: a job runs on a schedule or after other jobs, not both`}},
	{"no schedule, no after", "jobs:\n  - name: a\n    command: [x]\n",
		[]string{`t.yaml:2:5: job "a": schedule: no schedule and no after`}},
	{"unknown upstream", "jobs:\n  - name: a\n" + okJob + "  - name: b\n    command: [x]\n    after: [a, nope]\n",
		[]string{`t.yaml:7:16: job "b": after.1: unknown upstream "nope"`}},
	{"self dependency", "jobs:\n  - name: a\n    command: [x]\n    after: [a]\n",
		[]string{`t.yaml:4:13: job "a": after.0: a job cannot run after itself`}},
	{"cycle", "jobs:\n" +
		"  - name: root\n" + okJob +
		"  - name: a\n    command: [x]\n    after: [c, root]\n" +
		"  - name: b\n    command: [x]\n    after: [a]\n" +
		"  - name: c\n    command: [x]\n    after: [b]\n",
		[]string{`t.yaml:7:12: job "a": after: dependency cycle: a -> c -> b -> a`}},
	{"negative duration", "jobs:\n  - name: a\n" + okJob + "    timeout: -5s\n",
		[]string{`t.yaml:5:14: job "a": timeout: negative (-5s) (use 0 or a positive duration)`}},
	{"not a duration", "jobs:\n  - name: a\n" + okJob + "    kill_grace: 5 minutes\n",
		[]string{`t.yaml:5:17: job "a": kill_grace: "5 minutes" is not a duration (write a number with a unit`}},
	{"bad policies", "jobs:\n  - name: a\n" + okJob + "    concurrency: sometimes\n    catchup: all\n",
		[]string{`t.yaml:5:18: job "a": concurrency: unknown value "sometimes" (use forbid, allow or replace)`,
			`t.yaml:6:14: job "a": catchup: unknown value "all" (use skip or once)`}},
	{"wrong type", "jobs:\n  - name: a\n" + okJob + "    retries: many\n",
		[]string{`t.yaml:5:14: job "a": retries: cannot use "many" here: expected a whole number`}},
	{"retries out of range", "jobs:\n  - name: a\n" + okJob + "    retries: -1\n",
		[]string{`t.yaml:5:14: job "a": retries: -1 is out of range`}},
	{"command as a string", "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: ls -l\n",
		[]string{`t.yaml:4:14: job "a": command: cannot use "ls -l" here: expected a list of strings`}},
	{"bad env", "jobs:\n  - name: a\n" + okJob + "    env: {\"A=B\": x}\n",
		[]string{`t.yaml:5:10: job "a": env: bad variable "A=B"`}},
	{"yaml syntax", "jobs:\n  - name: a\n   schedule: [\n",
		[]string{`t.yaml:1:1: YAML syntax: did not find expected '-' indicator (the mistake is in the block that starts here`}},
	{"two documents", "jobs: []\n---\njobs: []\n",
		[]string{`t.yaml:2:1: a second YAML document`}},
	{"defaults problems", "defaults:\n  timezone: Nowhere\n  retries: 500\n  catchup: never\njobs: []\n",
		[]string{`t.yaml:2:13: timezone: unknown timezone "Nowhere"`, `t.yaml:3:12: retries: 500 is out of range`, `t.yaml:4:12: catchup: unknown value "never"`}},
	{"every problem at once", "jobs:\n" +
		"  - name: a\n    schedule: \"* * *\"\n    command: [x]\n    timeout: -1m\n" +
		"  - name: b\n    command: [x]\n    after: [zzz]\n    concurrency: x\n",
		[]string{`t.yaml:3:15: job "a": schedule:`, `t.yaml:5:14: job "a": timeout: negative`,
			`t.yaml:8:13: job "b": after.0: unknown upstream "zzz"`, `t.yaml:9:18: job "b": concurrency: unknown value "x"`}},
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range parseErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, err := Parse("t.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", f)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FileError: %v", err, err)
			}
			if len(fe.Issues) != len(tc.want) {
				t.Fatalf("got %d issues, want %d:\n%v", len(fe.Issues), len(tc.want), err)
			}
			for i, w := range tc.want {
				if got := fe.Issues[i].Error(); !strings.HasPrefix(got, w) {
					t.Errorf("issue %d:\n got  %s\n want %s...", i, got, w)
				}
			}
			if apollo.ErrorCode(err) != apollo.EINVALID {
				t.Errorf("ErrorCode = %q, want %q", apollo.ErrorCode(err), apollo.EINVALID)
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "read jobs file") {
		t.Errorf("LoadFile(missing) = %v", err)
	}
	if err := os.WriteFile(path, []byte("jobs:\n  - name: a\n    schedule: nope\n    command: [x]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":3:15: ") {
		t.Errorf("LoadFile(bad) = %v, want the path and position first", err)
	}
}

// FuzzParse feeds arbitrary bytes to Parse: it must not panic, every issue
// it reports must have a position, and what it accepts must compile.
func FuzzParse(f *testing.F) {
	f.Add([]byte("jobs:\n  - name: a\n    schedule: \"*/5 * * * *\"\n    command: [x]\n"))
	f.Add([]byte("defaults: {timezone: Europe/Berlin, timeout: 10m}\njobs:\n  - {name: a, schedule: \"@every 30s\", shell: \"true\"}\n  - {name: b, after: [a], command: [y]}\n"))
	f.Add([]byte("jobs:\n  - name: a\n    after: [b]\n    command: [x]\n  - name: b\n    after: [a]\n    command: [x]\n"))
	f.Add([]byte("jobs:\n  - name: a\n    schedule: 61 * * * *\n    timeout: -1s\n    retries: x\n    bogus: 1\n"))
	f.Add([]byte("jobs: [\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Add([]byte("jobs:\n  - &a {name: a, schedule: \"@daily\", command: [x]}\n  - *a\n"))
	f.Add([]byte("jobs: []\n---\nx: 1\n"))
	f.Add([]byte("jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    command: [\"x\x1b[2J\"]\n"))
	f.Add([]byte("jobs:\r\n  - name: \"\u00e9\xff\"\r\n"))
	f.Add([]byte("jobs:\n  - {name: a, schedule: \"@every 9223372036854775807ns\", command: [x]}\n  - {name: b, schedule: \"@every 8760h\", command: [x]}\n"))
	f.Add([]byte("jobs:\n  - {name: a, schedule: \"@every 2562047h\", command: [x], retries: 9223372036854775807, timeout: 9223372036854775807ns}\n"))
	f.Add([]byte("jobs:\n  - name: a\n    schedule: \"@daily\"\n    command: [\"true\"]\n    dir: \"/tmp/\x1b[2Jx\"\n"))
	f.Add([]byte("jobs:\n  - name: a\n    command: [\"tr\xc3\xa9s\", \"\xff\"]\n"))
	f.Add([]byte("jobs:\r\n  - name: a\r\x85  \u2028\x00\n"))
	f.Add([]byte("\xef\xbb\xbfjobs: []\n\ufeff"))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse("f.yaml", src)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) || len(fe.Issues) == 0 {
				t.Fatalf("error without issues: %T %v", err, err)
			}
			for _, is := range fe.Issues {
				if is.Line < 1 || is.Col < 1 {
					t.Fatalf("issue without a position: %+v", is)
				}
			}
			if is := fe.Issues[0]; strings.HasPrefix(is.Message, "YAML syntax: ") && sourcefile.Refused(is.Message) {
				if bad := sourcefile.BadChar(src, "a jobs file"); bad != nil && (is.Line != bad.Line || is.Col != bad.Col) {
					t.Fatalf("a refused character reported at %d:%d, not where it is (%d:%d): %+v", is.Line, is.Col, bad.Line, bad.Col, is)
				}
			}
			return
		}
		set, issues := file.compile()
		if len(issues) > 0 || len(set.jobs) != len(file.Jobs) {
			t.Fatalf("accepted file does not compile: %v", issues)
		}
		// Every run of an accepted schedule falls in the range the server
		// takes: "@every 9223372036854775807ns" was accepted, its next run
		// in 2262.
		now, limit := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC), time.UnixMilli(apollo.MaxTs)
		for _, j := range set.jobs {
			for at, k := now, 0; j.sched != nil && k < 3; k++ {
				next := j.sched.Next(at)
				if !next.After(at) || !next.Before(limit) {
					t.Fatalf("job %q (%s): the run after %v is at %v, want after it and before %v", j.name, j.sched, at, next, limit)
				}
				at = next
			}
		}
	})
}
