package expect

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

func mustParse(t testing.TB, src string) *Set {
	t.Helper()
	s, err := Parse("e.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%s\n%v", src, err)
	}
	return s
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
defaults:
  timezone: Europe/Berlin
  grace: 10m
  max_runtime: 2h
  min_runtime: 5s
  flapping: {changes: 4, window: 30m}
expectations:
  - job: inherits
    schedule: "30 2 * * *"
  - job: overrides
    schedule: "@hourly"
    timezone: UTC
    grace: 0
    max_runtime: 0
    min_runtime: 0s
    flapping: {changes: 6, window: 2h, hold: 1h}
  - job: periodic
    every: 15m
  - job: bounds_only
    max_runs: 3
    runs_window: 1h
    upstream: [inherits, elsewhere]
`)
	want := []Expectation{
		{Job: "inherits", Schedule: "30 2 * * *", Timezone: "Europe/Berlin", Grace: 10 * time.Minute, MaxRuntime: 2 * time.Hour,
			MinRuntime: 5 * time.Second, Flapping: Flapping{Changes: 4, Window: 30 * time.Minute}},
		{Job: "overrides", Schedule: "@hourly", Timezone: "UTC", Flapping: Flapping{Changes: 6, Window: 2 * time.Hour, Hold: time.Hour}},
		// A period has no timezone: the default one does not apply.
		{Job: "periodic", Every: 15 * time.Minute, Grace: 10 * time.Minute, MaxRuntime: 2 * time.Hour, MinRuntime: 5 * time.Second,
			Flapping: Flapping{Changes: 4, Window: 30 * time.Minute}},
		// Without a schedule or a period there is no grace to give.
		{Job: "bounds_only", MaxRuntime: 2 * time.Hour, MinRuntime: 5 * time.Second, MaxRuns: 3, RunsWindow: time.Hour,
			Upstream: []string{"inherits", "elsewhere"}, Flapping: Flapping{Changes: 4, Window: 30 * time.Minute}},
	}
	if got := s.Expectations(); !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
	if e, ok := s.Lookup("periodic"); !ok || e.Every != 15*time.Minute {
		t.Errorf("Lookup(periodic) = %+v, %v", e, ok)
	}
	if _, ok := s.Lookup("nobody"); ok {
		t.Error("Lookup(nobody) found something")
	}
}

func TestParseDefaultGrace(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "expectations:\n  - {job: a, every: 1h}\n  - {job: b, schedule: \"@daily\"}\n  - {job: c, max_runtime: 1m}\n")
	for job, want := range map[string]time.Duration{"a": DefaultGrace, "b": DefaultGrace, "c": 0} {
		if e, _ := s.Lookup(job); e.Grace != want {
			t.Errorf("%s: grace %v, want %v", job, e.Grace, want)
		}
	}
}

func TestParseEmpty(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"", "# nothing yet\n", "expectations: []\n", "expectations:\n", "~\n", "defaults: {grace: 1m}\n"} {
		s, err := Parse("e.yaml", []byte(src))
		if err != nil || s.Len() != 0 {
			t.Errorf("Parse(%q) = %v, %v; want an empty set", src, s, err)
		}
	}
}

// parseErrorCases are files with problems and the issues Parse must
// report for each, in order and in full.
var parseErrorCases = []struct {
	name string
	src  string
	want []string
}{
	{"unknown field", "expectations:\n  - job: a\n    every: 1h\n    graec: 5m\n",
		[]string{`e.yaml:4:5: job "a": graec: unknown field (known fields are job, schedule, timezone, every, grace, max_runtime, min_runtime, max_runs, runs_window, upstream, flapping)`}},
	{"unknown top-level field", "expectation:\n  - job: a\n",
		[]string{`e.yaml:1:1: expectation: unknown field (known fields are defaults, expectations)`}},
	{"unknown defaults field", "defaults:\n  every: 1h\n",
		[]string{`e.yaml:2:3: every: unknown field (known fields are timezone, grace, max_runtime, min_runtime, flapping)`}},
	{"unknown flapping field", "expectations:\n  - job: a\n    flapping: {changes: 3, hold: 1m, windoww: 1h}\n",
		[]string{`e.yaml:3:38: job "a": flapping.windoww: unknown field (known fields are changes, window, hold)`}},
	{"a field twice", "expectations:\n  - job: a\n    every: 1h\n    every: 2h\n",
		[]string{`e.yaml:4:5: job "a": every: given twice (the first is at line 3; keep one)`}},
	{"job missing", "expectations:\n  - every: 1h\n",
		[]string{`e.yaml:2:5: job: missing (every expectation names its job, like job: nightly_backup)`}},
	{"job name with a newline", "expectations:\n  - job: \"a\\nb\"\n",
		[]string{`e.yaml:2:10: job: "a\nb" holds control characters or invalid UTF-8 (use the name the job's runs report)`}},
	{"a control character", "expectations:\n  - job: a\n    every: 1h\n    upstream: [\"b\x1b[2Jc\"]\n",
		[]string{`e.yaml:4:18: YAML syntax: a control character (U+001B) is not allowed in an expectations file (remove it; in a double-quoted value write it as an escape, like "\x1b")`}},
	{"a byte that is not UTF-8", "expectations:\n  - job: tr\u00e9s\n    every: 1h\n  - job: \xff\n",
		[]string{`e.yaml:4:10: YAML syntax: a byte that is not UTF-8 (0xFF) (save the file as UTF-8)`}},
	{"a job twice", "expectations:\n  - job: a\n    every: 1h\n  - job: a\n    every: 2h\n",
		[]string{`e.yaml:4:10: job "a": job: a second expectation for this job (the first is at line 2; keep one)`}},
	{"bad cron", "expectations:\n  - job: a\n    schedule: \"30 25 * * *\"\n",
		[]string{`e.yaml:3:15: job "a": schedule: "30 25 * * *": hour field "25": "25" is not a number from 0 to 23 (see docs/expectations.md for the forms a schedule takes)`}},
	{"schedule and every", "expectations:\n  - job: a\n    schedule: \"@daily\"\n    every: 1h\n",
		[]string{`e.yaml:4:12: job "a": every: both schedule and every are set (keep schedule (runs at fixed times) or every (a run within every of the last), not both)`}},
	{"unknown timezone", "expectations:\n  - job: a\n    schedule: \"@daily\"\n    timezone: Mars/Olympus\n",
		[]string{`e.yaml:4:15: job "a": timezone: unknown timezone "Mars/Olympus" (use an IANA name like Europe/Berlin, Asia/Shanghai or UTC)`}},
	{"timezone with a period", "expectations:\n  - job: a\n    every: 1h\n    timezone: UTC\n",
		[]string{`e.yaml:4:15: job "a": timezone: timezone without a schedule (a timezone is how a schedule is read; remove it, or add a schedule)`}},
	{"grace alone", "expectations:\n  - job: a\n    grace: 5m\n",
		[]string{`e.yaml:3:12: job "a": grace: grace without a schedule or every (grace is how late a run may start: add a schedule or every, or remove grace)`}},
	{"not a duration", "expectations:\n  - job: a\n    every: 1d\n    max_runtime: soon\n",
		[]string{
			`e.yaml:3:12: job "a": every: "1d" is not a duration (write 24h for a day)`,
			`e.yaml:4:18: job "a": max_runtime: "soon" is not a duration (write a number with a unit, like 30s, 10m or 1h30m, or 0)`,
		}},
	{"negative and too long", "expectations:\n  - job: a\n    every: 400ms\n    min_runtime: -1s\n    max_runtime: 9000h\n",
		[]string{
			`e.yaml:3:12: job "a": every: 400ms is too short (use at least 1s)`,
			`e.yaml:4:18: job "a": min_runtime: negative (-1s) (use 0 or a positive duration)`,
			`e.yaml:5:18: job "a": max_runtime: 9000h0m0s is too long (use at most 8784h0m0s (366 days))`,
		}},
	{"min not below max", "expectations:\n  - job: a\n    max_runtime: 1m\n    min_runtime: 1m\n",
		[]string{`e.yaml:4:18: job "a": min_runtime: 1m0s is not below max_runtime 1m0s (min_runtime must be below max_runtime)`}},
	{"max_runs without window", "expectations:\n  - job: a\n    max_runs: 2\n",
		[]string{`e.yaml:3:15: job "a": max_runs: max_runs without runs_window (add runs_window: the span max_runs counts over, like 1h)`}},
	{"window without max_runs", "expectations:\n  - job: a\n    runs_window: 1h\n",
		[]string{`e.yaml:3:18: job "a": runs_window: runs_window without max_runs (add max_runs, or remove runs_window)`}},
	{"max_runs out of range", "expectations:\n  - job: a\n    max_runs: 5000\n    runs_window: 1h\n",
		[]string{`e.yaml:3:15: job "a": max_runs: 5000 is out of range (use a number from 1 to 1000, or 0 for no limit)`}},
	{"max_runs not a number", "expectations:\n  - job: a\n    max_runs: many\n    runs_window: 1h\n",
		[]string{`e.yaml:3:15: job "a": max_runs: cannot use "many" here: expected a whole number`}},
	{"upstream problems", "expectations:\n  - job: a\n    upstream: [a, b, b, [c]]\n",
		[]string{
			`e.yaml:3:16: job "a": upstream.0: a job cannot depend on itself (remove it from upstream)`,
			`e.yaml:3:22: job "a": upstream.2: "b" is listed twice (list each upstream job once)`,
			`e.yaml:3:25: job "a": upstream.3: cannot use a list here: expected a job name`,
		}},
	{"upstream not a list", "expectations:\n  - job: a\n    upstream: b\n",
		[]string{`e.yaml:3:15: job "a": upstream: cannot use "b" here: expected a list of job names (write upstream: [extract, transform])`}},
	{"cycle", "expectations:\n  - {job: x, upstream: [y]}\n  - {job: y, upstream: [z]}\n  - {job: z, upstream: [x, outside]}\n",
		[]string{`e.yaml:2:24: job "x": upstream: dependency cycle: x -> y -> z -> x (remove one of these upstream entries: alerts would hold each other forever)`}},
	{"flapping", "expectations:\n  - job: a\n    flapping: {changes: 1}\n  - job: b\n    flapping: {hold: 1m}\n  - job: c\n    flapping: 4\n",
		[]string{
			`e.yaml:3:25: job "a": flapping.changes: 1 is out of range (use a number from 2 to 100)`,
			`e.yaml:5:15: job "b": flapping.changes: missing (say how many switches between success and failure make a job flap, like changes: 4)`,
			`e.yaml:7:15: job "c": flapping: cannot use "4" here: expected a mapping (write flapping: {changes: 4, window: 1h, hold: 30m})`,
		}},
	{"a bad default is told once", "defaults:\n  grace: -1m\n  timezone: Nowhere\nexpectations:\n  - {job: a, every: 1h}\n  - {job: b, schedule: \"@daily\"}\n",
		[]string{
			`e.yaml:2:10: grace: negative (-1m0s) (use 0 or a positive duration)`,
			`e.yaml:3:13: timezone: unknown timezone "Nowhere" (use an IANA name like Europe/Berlin, Asia/Shanghai or UTC)`,
		}},
	{"a default in conflict", "defaults:\n  min_runtime: 10m\nexpectations:\n  - {job: a, max_runtime: 5m}\n",
		[]string{`e.yaml:4:5: job "a": min_runtime: 10m0s is not below max_runtime 5m0s (min_runtime must be below max_runtime)`}},
	{"not a mapping", "- job: a\n",
		[]string{`e.yaml:1:1: the file is a list (write a mapping with defaults: and expectations:)`}},
	{"expectations not a list", "expectations: {job: a}\n",
		[]string{`e.yaml:1:15: expectations: cannot use a mapping here: expected a list of expectations (write expectations: followed by items that start with - job: ...)`}},
	{"item not a mapping", "expectations:\n  - a\n",
		[]string{`e.yaml:2:5: cannot use "a" here: expected an expectation (a mapping) (start each item with - job: ...)`}},
	{"syntax", "expectations:\n  - job: a\n    every: [1h\n",
		[]string{`e.yaml:2:1: YAML syntax: did not find expected ',' or ']' (the mistake is in the block that starts here; check indentation, quotes and brackets)`}},
	{"two documents", "expectations: []\n---\nexpectations: []\n",
		[]string{`e.yaml:2:1: a second YAML document (an expectations file is one document; remove the '---' and what follows, or merge it)`}},
	{"every problem at once, in file order", "expectations:\n  - job: a\n    every: soon\n    grace: 1m\n  - job: b\n    schedule: \"@daily\"\n    colour: red\n",
		[]string{
			`e.yaml:3:12: job "a": every: "soon" is not a duration (write a number with a unit, like 30s, 10m or 1h30m, or 0)`,
			`e.yaml:7:5: job "b": colour: unknown field (known fields are job, schedule, timezone, every, grace, max_runtime, min_runtime, max_runs, runs_window, upstream, flapping)`,
		}},
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range parseErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse("e.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", s.Expectations())
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FileError: %v", err, err)
			}
			var got []string
			for _, is := range fe.Issues {
				got = append(got, is.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if apollo.ErrorCode(err) != apollo.EINVALID {
				t.Errorf("ErrorCode = %q, want %q", apollo.ErrorCode(err), apollo.EINVALID)
			}
		})
	}
}

func TestNewSet(t *testing.T) {
	t.Parallel()
	good := []Expectation{
		{Job: "extract", Schedule: "0 2 * * *", Timezone: "Asia/Shanghai", Grace: time.Minute},
		{Job: "load", Upstream: []string{"extract"}, MaxRuntime: time.Hour},
	}
	s, err := NewSet(good)
	if err != nil || s.Len() != 2 {
		t.Fatalf("NewSet = %v, %v", s, err)
	}
	// No defaults apply: a zero grace stays zero.
	if e, _ := s.Lookup("extract"); !reflect.DeepEqual(e, good[0]) {
		t.Errorf("Lookup = %+v", e)
	}
	// The set does not share memory with the caller.
	good[1].Upstream[0] = "changed"
	if e, _ := s.Lookup("load"); e.Upstream[0] != "extract" {
		t.Error("the set shares Upstream with its input")
	}
	_, err = NewSet([]Expectation{{Job: "a", Every: time.Hour, Schedule: "@daily"}, {Upstream: []string{"a"}}, {Job: "b", Upstream: []string{"c"}}, {Job: "c", Upstream: []string{"b"}}})
	// Without a file, issues name the job and the field only.
	want := `3 problems in the expectations:
  job "a": every: both schedule and every are set (keep schedule (runs at fixed times) or every (a run within every of the last), not both)
  job: missing (every expectation names its job, like job: nightly_backup)
  job "b": upstream: dependency cycle: b -> c -> b (remove one of these upstream entries: alerts would hold each other forever)`
	if err == nil || err.Error() != want {
		t.Errorf("NewSet(bad) =\n%v\nwant\n%s", err, want)
	}
}

// TestMarshalRoundTrip: Marshal writes every value, defaults resolved, and
// Parse reads it back into an equal set.
func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `
defaults: {timezone: Asia/Shanghai, grace: 0, flapping: {changes: 3}}
expectations:
  - {job: "报表 daily", schedule: "30 2 * * *", max_runtime: 90m, min_runtime: 500ms}
  - {job: "yes", every: 1h30m, upstream: ["报表 daily", "no"], max_runs: 2, runs_window: 1h}
  - {job: "a: b # c", flapping: {changes: 5, window: 10m, hold: 1h}}
`)
	out := s.Marshal()
	back, err := Parse("m.yaml", out)
	if err != nil {
		t.Fatalf("Marshal wrote what Parse refuses:\n%s\n%v", out, err)
	}
	if !reflect.DeepEqual(back.Expectations(), s.Expectations()) {
		t.Errorf("round trip:\n%s\n got %+v\nwant %+v", out, back.Expectations(), s.Expectations())
	}
	if !strings.Contains(string(out), "grace: 0s") {
		t.Errorf("a zero grace must be written, or it reads back as the default:\n%s", out)
	}
}

// FuzzParse: Parse never panics; every issue has a place; what it accepts
// survives Marshal and Parse unchanged.
func FuzzParse(f *testing.F) {
	for _, tc := range parseErrorCases {
		f.Add([]byte(tc.src))
	}
	f.Add([]byte("defaults:\n  timezone: Europe/Berlin\n  grace: 10m\nexpectations:\n  - job: a\n    schedule: \"30 2 * * *\"\n    max_runtime: 1h\n  - job: b\n    every: 15m\n    upstream: [a]\n    max_runs: 2\n    runs_window: 1h\n    flapping: {changes: 4, window: 1h, hold: 30m}\n"))
	f.Add([]byte("expectations:\n  - &x {job: a, every: 1h}\n  - *x\n"))
	f.Add([]byte("expectations:\n  - {job: a, every: 1h, upstream: &u [b]}\n  - {job: c, upstream: *u}\n"))
	f.Add([]byte("expectations: [{job: 0x10, max_runs: 0x10, runs_window: 1h}]"))
	f.Add([]byte("a: &a [x, x, x, x, x, x, x, x, x, x]\nexpectations: [*a, *a, *a, *a, *a, *a, *a, *a]\n")) // past the aliases' budget
	f.Fuzz(func(t *testing.T, src []byte) {
		s, err := Parse("f.yaml", src)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) || len(fe.Issues) == 0 {
				t.Fatalf("error without issues: %T %v", err, err)
			}
			for _, is := range fe.Issues {
				if is.Line < 1 || is.Col < 1 || is.Message == "" {
					t.Fatalf("issue without a place or a message: %+v", is)
				}
				if strings.HasPrefix(is.Message, "YAML syntax: ") && sourcefile.Refused(is.Message) {
					if bad := sourcefile.BadChar(src, "an expectations file"); bad != nil && (is.Line != bad.Line || is.Col != bad.Col) {
						t.Fatalf("a refused character reported at %d:%d, not where it is (%d:%d): %+v", is.Line, is.Col, bad.Line, bad.Col, is)
					}
				}
			}
			return
		}
		out := s.Marshal()
		back, err := Parse("m.yaml", out)
		if err != nil {
			t.Fatalf("Marshal wrote what Parse refuses:\n%s\n%v", out, err)
		}
		if !reflect.DeepEqual(back.Expectations(), s.Expectations()) {
			t.Fatalf("round trip:\n%s\n got %+v\nwant %+v", out, back.Expectations(), s.Expectations())
		}
	})
}

// doneAfter is a context that is done once Err has been asked n times:
// the check is provably under way when its client goes.
type doneAfter struct {
	context.Context
	n, asked int
}

func (c *doneAfter) Err() error {
	if c.asked++; c.asked > c.n {
		return context.Canceled
	}
	return nil
}

// A check whose client has gone stops with the context's error, between
// two expectations of the file or of the set, not at the end of a file
// of any size.
func TestACheckStopsWhenItsContextIsDone(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("expectations:\n")
	for i := range 10 * checkEvery {
		fmt.Fprintf(&b, "  - {job: j%d, every: 5m}\n", i)
	}
	for _, asked := range []int{0, 1, 5, 10} {
		ctx := &doneAfter{Context: context.Background(), n: asked}
		set, err := ParseContext(ctx, "big.yaml", []byte(b.String()))
		if !errors.Is(err, context.Canceled) || set != nil {
			t.Errorf("done after %d looks: %v, %v; want context.Canceled", asked, set, err)
		}
		// Each look covers checkEvery expectations: the check did not go
		// through the file once it was told, and then through the set.
		if ctx.asked > asked+2 {
			t.Errorf("done after %d looks: looked %d times, went on after it was done", asked, ctx.asked)
		}
	}
	if _, err := ParseContext(t.Context(), "big.yaml", []byte(b.String())); err != nil {
		t.Fatal(err)
	}
}

// A value of megabytes with a problem is named by its first bytes and
// its size, not echoed whole in the answer, the CLI and the log. Before,
// a schedule, a duration or a count of 2 MiB made a problem of 2 MiB.
func TestAHugeValueIsNotEchoedWhole(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("7 ", 1<<20)
	for _, field := range []string{"schedule", "timezone", "every", "grace", "max_runtime", "max_runs", "runs_window"} {
		src := "expectations:\n  - job: a\n    " + field + ": \"" + huge + "\"\n"
		if field == "timezone" {
			src += "    schedule: \"@daily\"\n"
		}
		_, err := Parse("e.yaml", []byte(src))
		var fe *FileError
		if !errors.As(err, &fe) {
			t.Fatalf("%s: %v, want its problem", field, err)
		}
		if msg := err.Error(); len(msg) > 1024 || !strings.Contains(msg, field+":") || !strings.Contains(msg, "(2097152 bytes)") {
			t.Errorf("%s: a problem of %d bytes: %.300s", field, len(msg), msg)
		}
	}
}
