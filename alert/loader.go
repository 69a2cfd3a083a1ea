package alert

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/atomicfile"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/sourcefile"
	"github.com/apollo-11/apollo/rules"
)

// DefaultPollEvery is how often a Loader looks at its file.
const DefaultPollEvery = 2 * time.Second

// LoaderOptions configure a Loader. Path and OnLoad are required.
type LoaderOptions struct {
	Path   string
	Clock  apollo.Clock // default apollo.SystemClock
	Logger *slog.Logger // default slog.Default()
	Every  time.Duration
	// KnownChannel checks NOTIFY names against the configured channels;
	// nil accepts any name.
	KnownChannel func(name string) bool
	// MetricsKept is how long the metrics are kept (retention.rollups):
	// a rule that reads further back is refused (rules.CheckReach); 0
	// does not check.
	MetricsKept time.Duration
	// OnLoad receives every good version of the file, e.g.
	// engine.SetRulesSource("", rs, src).
	OnLoad func(rs []*rules.Rule, src []byte)
}

// Loader reads a rules file, and again whenever its modification time or
// size changes (polled on the clock) or Reload is called (SIGHUP). A
// version with any error is refused as a whole and logged with every
// problem; the rules loaded before keep running.
type Loader struct {
	opts LoaderOptions
	log  *slog.Logger

	mu      sync.Mutex // serializes loads and writes
	seen    fileStamp  // the version last looked at, good or bad
	applied []byte     // the text last handed to OnLoad
	nRules  int        // how many rules and inhibit rules that text had

	life lifecycle.Group // the poll loop
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewLoader checks opts; it does not read the file (Load does).
func NewLoader(opts LoaderOptions) (*Loader, error) {
	opts.Clock = cmp.Or[apollo.Clock](opts.Clock, apollo.SystemClock)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Every = cmp.Or(opts.Every, DefaultPollEvery)
	switch {
	case opts.Path == "":
		return nil, &apollo.Error{Code: apollo.EINVALID, Field: "rules", Message: "no rules file", Hint: "give the path of a rules file (docs/rules.md)"}
	case opts.OnLoad == nil:
		return nil, errors.New("alert: loader: OnLoad is nil; pass a function that sets the engine's rules")
	case opts.Every < 100*time.Millisecond:
		return nil, &apollo.Error{Code: apollo.EINVALID, Field: "rules.every", Message: fmt.Sprintf("%v is below 100ms", opts.Every), Hint: "leave it unset for 2s"}
	}
	return &Loader{opts: opts, log: opts.Logger.With("component", "alert", "file", opts.Path), life: lifecycle.Group{Name: "alert: loader", Restart: true}}, nil
}

// Load reads the file now and hands it to OnLoad if it is good and
// differs from what was handed last. It returns the file's problems (a
// rules.ErrorList) or the I/O error; the caller decides whether a bad file
// at start-up is fatal.
func (l *Loader) Load() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, err := stamp(l.opts.Path)
	if err != nil {
		return l.fileError(err)
	}
	l.seen = st
	return l.loadLocked()
}

// fileError says that the file could not be read, and why, once: "rules
// file PATH: no such file or directory". It unwraps to the *fs.PathError.
func (l *Loader) fileError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &readError{path: l.opts.Path, err: pe}
	}
	return fmt.Errorf("rules file %s: %w", l.opts.Path, err)
}

type readError struct {
	path string
	err  *fs.PathError
}

func (e *readError) Error() string { return "rules file " + e.path + ": " + e.err.Err.Error() }
func (e *readError) Unwrap() error { return e.err }

// Reload is Load for SIGHUP: problems are logged, not returned.
func (l *Loader) Reload() { _ = l.Load() }

func (l *Loader) loadLocked() error {
	// Before the first good version there are no old rules to keep: the
	// error goes to the caller alone, which decides (start-up fails).
	loaded := l.applied != nil
	src, err := sourcefile.Read(l.opts.Path, "rules file", sourcefile.MaxSize)
	if err != nil {
		if loaded {
			l.log.Error("alert: cannot read the rules file; the old rules keep running", "err", err)
		}
		return l.fileError(err)
	}
	rs, n, err := l.check(src)
	if err != nil {
		if loaded {
			l.log.Error("alert: rules file refused; the old rules keep running", "problems", err.Error())
		}
		return err
	}
	if l.applied != nil && bytes.Equal(src, l.applied) {
		return nil
	}
	if n == 0 && l.nRules > 0 && !rules.SaysEmpty(src) {
		l.log.Error("alert: the rules file has no rules; refused, the old rules keep running (an editor may be half-way through saving it)",
			"rules", l.nRules, "hint", "to remove every rule on purpose, put the line "+EmptyMarker+" in the file")
		return &apollo.Error{Code: apollo.EINVALID, Field: "rules",
			Message: fmt.Sprintf("%s has no rules, and %d run now", l.opts.Path, l.nRules),
			Hint:    "to remove every rule on purpose, put the line " + EmptyMarker + " in the file"}
	}
	l.applied, l.nRules = src, n
	l.opts.OnLoad(rs, src)
	l.log.Info("alert: rules loaded", "rules", len(rs))
	return nil
}

// EmptyMarker is the comment line that tells a reload that a rules file
// without rules is meant to be so (docs/rules.md).
const EmptyMarker = rules.EmptyMarker

// check returns the file's rules and how many rules and inhibit rules
// it has (what a reload to no rules at all would lose).
func (l *Loader) check(src []byte) ([]*rules.Rule, int, error) {
	f, err := rules.ParseFile(l.opts.Path, src)
	if err != nil {
		return nil, 0, err
	}
	rs := f.Rules
	if l.opts.KnownChannel != nil {
		if err := rules.CheckChannels(rs, l.opts.KnownChannel); err != nil {
			return nil, 0, err
		}
	}
	if l.opts.MetricsKept > 0 {
		if err := rules.CheckReach(rs, l.opts.MetricsKept); err != nil {
			return nil, 0, err
		}
	}
	return rs, len(rs) + len(f.Inhibits), nil
}

// Write checks src and replaces the file with it atomically, as the API
// does after an accepted PUT of the rules. The caller has applied the
// rules already, so OnLoad is not called, and the next poll does not load
// the file again. A link is written through (atomicfile.Write); a file the
// server may not write is refused with an *apollo.Error (ECONFLICT), as
// the rules belong to whoever provides the file.
func (l *Loader) Write(src []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, n, err := l.check(src)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(l.opts.Path, src, 0o644); err != nil {
		if refused := atomicfile.Refusal("rules", l.opts.Path, err); refused != nil {
			return refused
		}
		return fmt.Errorf("alert: write rules: %w", err)
	}
	l.applied, l.nRules = bytes.Clone(src), n
	if st, err := stamp(l.opts.Path); err == nil {
		l.seen = st
	}
	return nil
}

// Applied returns the rules text in force from the file (a copy): what
// the last load or Write applied, nil before any.
func (l *Loader) Applied() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.applied)
}

// poll loads the file if it changed since it was last looked at.
func (l *Loader) poll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, err := stamp(l.opts.Path)
	if err != nil {
		if l.seen != (fileStamp{}) { // say it once, not every poll
			l.log.Error("alert: cannot read the rules file; the old rules keep running", "err", err)
		}
		l.seen = fileStamp{}
		return
	}
	if st == l.seen {
		return
	}
	l.seen = st
	_ = l.loadLocked()
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// Start polls the file every Every on the clock until Stop. It does not
// load the file first: call Load for that.
func (l *Loader) Start(ctx context.Context) error {
	return l.life.Start(ctx, func(context.Context) error {
		l.life.Tick(l.opts.Clock, l.opts.Every, func(context.Context) { l.poll() })
		return nil
	})
}

// Stop ends polling and waits for it, or for ctx. It may be called any
// number of times.
func (l *Loader) Stop(ctx context.Context) error { return l.life.Stop(ctx, nil) }
