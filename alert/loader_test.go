package alert_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/rules"
)

// logs is a slog handler that hands every record's level, message and
// attributes to a channel, so a test can wait for a log line.
type logs chan string

func (l logs) Enabled(context.Context, slog.Level) bool { return true }
func (l logs) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	select {
	case l <- b.String():
	default:
	}
	return nil
}
func (l logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logs) WithGroup(string) slog.Handler      { return l }

func (l logs) waitFor(t *testing.T, part string) string {
	t.Helper()
	timeout := time.After(testwait.Timeout(t))
	for {
		select {
		case s := <-l:
			if strings.Contains(s, part) {
				return s
			}
		case <-timeout:
			t.Fatalf("no log line with %q", part)
		}
	}
}

// The loader hands every good version of the file on; a bad version is
// refused with its problems logged, and the rules before it stay.
func TestLoaderKeepsOldRulesOnABadFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.txt")
	write := func(src string, mod time.Time) {
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, mod, mod) // a new modification time, however fast the test runs
	}
	write(`RULE a task_prefix: "a_" THRESHOLD: failed > 0 NOTIFY: ops`, t0)
	clock := apollo.NewFakeClock(t0)
	loaded := make(chan []*rules.Rule, 10)
	lg := make(logs, 100)
	l, err := alert.NewLoader(alert.LoaderOptions{Path: path, Clock: clock, Logger: slog.New(lg),
		KnownChannel: func(name string) bool { return name == "ops" },
		OnLoad:       func(rs []*rules.Rule, src []byte) { loaded <- rs }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Load(); err != nil {
		t.Fatal(err)
	}
	if rs := <-loaded; len(rs) != 1 || rs[0].Name != "a" {
		t.Fatalf("loaded %v", rs)
	}
	if err := l.Start(bg); err != nil {
		t.Fatal(err)
	}
	defer l.Stop(context.Background())

	write(`RULE a task_prefix: "a_" THRESHOLD: failed > 0 NOTIFY: opz`, t0.Add(time.Second))
	clock.Advance(alert.DefaultPollEvery)
	line := lg.waitFor(t, "rules file refused")
	if !strings.Contains(line, `1:56: rule a notifies unknown channel "opz"`) {
		t.Errorf("the log does not name the problem: %s", line)
	}
	write(`RULE a task_prefix: "a_" WINDOW: 15s THRESHOLD: failed > 0`, t0.Add(2*time.Second))
	clock.Advance(alert.DefaultPollEvery)
	lg.waitFor(t, "not a multiple of 10s")

	write(`RULE b task_prefix: "b_" ON: failed NOTIFY: ops`, t0.Add(3*time.Second))
	clock.Advance(alert.DefaultPollEvery)
	select {
	case rs := <-loaded:
		if len(rs) != 1 || rs[0].Name != "b" {
			t.Fatalf("loaded %v", rs)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the fixed file was not loaded")
	}
	// Write replaces the file without calling OnLoad: the caller applied
	// the rules already, and reading the file again (a poll, SIGHUP) does
	// not apply them a second time.
	if err := l.Write([]byte(`RULE c task_prefix: "c_" ON: failed`)); err != nil {
		t.Fatal(err)
	}
	if err := l.Write([]byte(`RULE c task_prefix: "c_" ON: faild`)); err == nil {
		t.Fatal("Write took a bad file")
	}
	l.Reload()
	select {
	case rs := <-loaded:
		t.Fatalf("loaded %v after Write", rs)
	default:
	}
	if b, _ := os.ReadFile(path); string(b) != `RULE c task_prefix: "c_" ON: failed` {
		t.Fatalf("file %q", b)
	}
}

func TestLoaderOptions(t *testing.T) {
	t.Parallel()
	if _, err := alert.NewLoader(alert.LoaderOptions{OnLoad: func([]*rules.Rule, []byte) {}}); apollo.ErrorCode(err) != apollo.EINVALID {
		t.Errorf("no path: %v", err)
	}
	if _, err := alert.NewLoader(alert.LoaderOptions{Path: "x"}); err == nil {
		t.Error("no OnLoad accepted")
	}
	l, _ := alert.NewLoader(alert.LoaderOptions{Path: filepath.Join(t.TempDir(), "missing"), OnLoad: func([]*rules.Rule, []byte) {}, Logger: quiet})
	if err := l.Load(); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// An editor that truncates the file before writing it shows the loader an
// empty file for a moment. Taking that as "no rules" would switch alerting
// off without a word, so a reload that would leave no rules is refused,
// loudly, unless the file says it means it (docs/rules.md).
func TestLoaderRefusesAnAccidentallyEmptyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.txt")
	mod := t0
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		mod = mod.Add(time.Second)
		os.Chtimes(path, mod, mod)
	}
	write(`RULE a task_prefix: "a_" ON: failed`)
	clock := apollo.NewFakeClock(t0)
	loaded := make(chan []*rules.Rule, 10)
	lg := make(logs, 100)
	l, err := alert.NewLoader(alert.LoaderOptions{Path: path, Clock: clock, Logger: slog.New(lg),
		OnLoad: func(rs []*rules.Rule, src []byte) { loaded <- rs }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Load(); err != nil {
		t.Fatal(err)
	}
	// Load calls OnLoad before it returns.
	got := func() []*rules.Rule {
		t.Helper()
		select {
		case rs := <-loaded:
			return rs
		default:
			t.Fatal("nothing loaded")
			return nil
		}
	}
	got()
	nothingLoaded := func(what string) {
		t.Helper()
		select {
		case rs := <-loaded:
			t.Fatalf("%s: loaded %d rules", what, len(rs))
		default:
		}
	}
	for _, tc := range []struct{ name, src string }{
		{"truncated", ""},
		{"blank lines", "\n  \n"},
		{"only comments", "# RULE a task_prefix: \"a_\" ON: failed\n"},
		{"a marker with other words", "# apollo: empty? no\n"},
	} {
		write(tc.src)
		err := l.Load()
		if apollo.ErrorCode(err) != apollo.EINVALID || !strings.Contains(err.Error(), "# apollo: empty") {
			t.Errorf("%s: Load = %v, want a refusal that names the marker", tc.name, err)
		}
		nothingLoaded(tc.name)
		line := lg.waitFor(t, "no rules")
		if !strings.HasPrefix(line, "ERROR ") || !strings.Contains(line, "rules=1") {
			t.Errorf("%s: the refusal is not loud: %s", tc.name, line)
		}
	}
	// The poll refuses it too, and says so once, not at every poll.
	if err := l.Start(bg); err != nil {
		t.Fatal(err)
	}
	defer l.Stop(context.Background())
	write("")
	clock.Advance(alert.DefaultPollEvery)
	lg.waitFor(t, "no rules")
	nothingLoaded("the poll")

	// The editor finishes writing: the new version loads.
	write(`RULE b task_prefix: "b_" ON: failed`)
	if err := l.Load(); err != nil {
		t.Fatal(err)
	}
	if rs := got(); len(rs) != 1 || rs[0].Name != "b" {
		t.Fatalf("loaded %v", rs)
	}
	// Saying so empties the rules, in the text form and in JSON.
	for i, src := range []string{"# no alerts during the migration\n  # apollo: empty  \n", `{"rules": []}`} {
		write(fmt.Sprintf(`RULE c%d task_prefix: "c_" ON: failed`, i))
		if err := l.Load(); err != nil {
			t.Fatal(err)
		}
		got()
		write(src)
		if err := l.Load(); err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if rs := got(); len(rs) != 0 {
			t.Fatalf("%q: loaded %v", src, rs)
		}
	}
}

// A file whose only rules are inhibit rules is no less a file with
// rules: emptied by an editor, it is refused as one with RULEs is (before,
// the reload counted RULEs only and dropped the inhibit rules silently).
func TestLoaderRefusesEmptyingAFileOfInhibitRules(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.txt")
	if err := os.WriteFile(path, []byte("INHIBIT quiet SOURCE: rule=down TARGET: task_prefix=\"report_\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loads := 0
	l, err := alert.NewLoader(alert.LoaderOptions{Path: path, Clock: apollo.NewFakeClock(t0), Logger: slog.New(make(logs, 100)),
		OnLoad: func([]*rules.Rule, []byte) { loads++ }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Load(); err != nil || loads != 1 {
		t.Fatalf("first load: %v, %d loads", err, loads)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(path, t0.Add(time.Minute), t0.Add(time.Minute))
	if err := l.Load(); apollo.ErrorCode(err) != apollo.EINVALID || !strings.Contains(err.Error(), "1 run now") || loads != 1 {
		t.Errorf("emptied: Load = %v after %d loads; want the refusal counting the inhibit rule, and no load", err, loads)
	}
}

// A file that starts empty is no loss: the first load takes it.
func TestLoaderStartsFromAnEmptyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.txt")
	os.WriteFile(path, nil, 0o644)
	loaded := make(chan []*rules.Rule, 1)
	l, _ := alert.NewLoader(alert.LoaderOptions{Path: path, Logger: quiet, OnLoad: func(rs []*rules.Rule, _ []byte) { loaded <- rs }})
	if err := l.Load(); err != nil {
		t.Fatal(err)
	}
	if rs := <-loaded; len(rs) != 0 {
		t.Fatalf("loaded %v", rs)
	}
}

// The first load of a file that is missing or bad returns the error for
// the caller to report and logs nothing: there are no old rules that
// keep running yet, and the caller says it once (issue 21: start-up
// printed the prefix twice and spoke of old rules).
func TestLoaderFirstLoadFailsQuietly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte(`RULE a task_prefix: "a_" THRESHOLD: failed_rat > 0`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "missing.txt"), "rules file " + filepath.Join(dir, "missing.txt") + ": no such file or directory"},
		{"bad", bad, `unknown metric "failed_rat"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lg := make(logs, 100)
			l, err := alert.NewLoader(alert.LoaderOptions{Path: tc.path, Logger: slog.New(lg),
				OnLoad: func([]*rules.Rule, []byte) { t.Error("a bad file was loaded") }})
			if err != nil {
				t.Fatal(err)
			}
			err = l.Load()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want %q", err, tc.want)
			}
			if strings.Count(err.Error(), "rules") > 1+strings.Count(tc.path, "rules") {
				t.Errorf("the error repeats itself: %v", err)
			}
			if tc.name == "missing" && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%v is not fs.ErrNotExist", err)
			}
			close(lg)
			for line := range lg {
				if strings.HasPrefix(line, "ERROR") || strings.HasPrefix(line, "WARN") {
					t.Errorf("logged at the first load: %s", line)
				}
			}
		})
	}
}
