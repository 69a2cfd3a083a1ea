package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
)

// Rule is one alert rule. A rate rule (Expr set) is evaluated over a
// window every 10 seconds; an event rule (On or Occurrences set) fires on
// each matching event. Parse fills in every default, so the engine never
// guesses.
type Rule struct {
	Name   string
	Prefix string // job names starting with it; "" is every job

	Window      time.Duration // rate rules: the span the metrics cover
	Duration    time.Duration // rate rules: how long Expr must hold before firing
	Keep        time.Duration // rate rules: how long Expr must be false before resolving
	GroupWindow time.Duration // event rules: matches within it fold into one follow-up

	Expr        *Expr           // rate rules; nil for event rules
	On          []apollo.Status // event rules: the statuses runs reach
	Occurrences []Occurrence    // event rules: what expectations find (ON: missed)

	Notify   []string // channel names
	Severity apollo.Severity
	By       string // "" (the prefix as a whole) or "name" (each job name on its own)
	Labels   map[string]string

	Pos Pos // where the rule starts

	notifyPos []Pos // of each Notify entry, for CheckChannels
	windowPos Pos   // of the WINDOW value, for CheckReach; unset when defaulted
}

// IsEvent reports whether r fires on events (ON) rather than on a rate.
func (r *Rule) IsEvent() bool { return r.Expr == nil }

// Matches reports whether the rule watches the job.
func (r *Rule) Matches(jobName string) bool { return strings.HasPrefix(jobName, r.Prefix) }

// String is the canonical text of the rule, on one line, with every
// default written out: Parse(r.String()) gives an equal rule.
func (r *Rule) String() string {
	var b strings.Builder
	b.WriteString("RULE ")
	if r.Name != "" {
		b.WriteString(r.Name + " ")
	}
	b.WriteString("task_prefix: " + quote(r.Prefix))
	if r.IsEvent() {
		fmt.Fprintf(&b, " ON: %s GROUP_WINDOW: %s", strings.Join(r.onNames(), ", "), formatDuration(r.GroupWindow))
	} else {
		fmt.Fprintf(&b, " WINDOW: %s THRESHOLD: %s", formatDuration(r.Window), r.Expr)
		if r.Duration > 0 {
			b.WriteString(" DURATION: " + formatDuration(r.Duration))
		}
		if r.Keep > 0 {
			b.WriteString(" KEEP: " + formatDuration(r.Keep))
		}
		if r.By != "" {
			b.WriteString(" BY: " + r.By)
		}
	}
	b.WriteString(" SEVERITY: " + string(r.Severity))
	if len(r.Notify) > 0 {
		b.WriteString(" NOTIFY: " + strings.Join(r.Notify, ", "))
	}
	for i, k := range slices.Sorted(maps.Keys(r.Labels)) {
		sep := ", "
		if i == 0 {
			sep = " LABELS: "
		}
		v := r.Labels[k]
		if !isIdent(v) {
			v = quote(v)
		}
		b.WriteString(sep + k + "=" + v)
	}
	return b.String()
}

// onNames lists what an event rule fires on: statuses, then occurrences.
func (r *Rule) onNames() []string {
	names := make([]string, 0, len(r.On)+len(r.Occurrences))
	for _, s := range r.On {
		names = append(names, s.String())
	}
	for _, o := range r.Occurrences {
		names = append(names, o.String())
	}
	return names
}

// quote writes s as a rule string: only " and \ are escaped.
func quote(s string) string {
	return `"` + quoter.Replace(s) + `"`
}

// quoter is built once: building it for every string was four fifths of
// what a PUT of a large rules file allocated (every rule's canonical text
// quotes its prefix).
var quoter = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// generatedName names an unnamed rule after its meaning, so the name
// survives reformatting and reordering, and changes when the rule does.
func generatedName(r *Rule) string {
	c := *r
	c.Name = ""
	sum := sha256.Sum256([]byte(c.String()))
	return "rule_" + hex.EncodeToString(sum[:4])
}

// File is a rules file: its rules and its inhibit rules.
type File struct {
	Rules    []*Rule
	Inhibits []*Inhibit
}

// MaxWindows bounds the different windows a rules file's rate rules
// read: each is a table of every job of the tenant, read at every
// evaluation, and held with the others until the evaluation ends. A
// WINDOW with pct_change reads two (its window and the one before).
const MaxWindows = 32

// ParseFile reads a rules file in the text form or, when its first
// non-space byte is { or [, the JSON form. It returns every rule and
// inhibit rule, or, if anything is wrong, none and an ErrorList of up to
// 20 problems in file order.
func ParseFile(filename string, src []byte) (*File, error) {
	return parseWith(filename, src, &errs{})
}

// ParseSaved is ParseFile for a text that was accepted before and saved
// (a tenant's rules written through the API, read back at a start or by
// another process): the bounds a newer version added on sizes
// (MaxLabelValueBytes) are not applied to it, so that an upgrade does not
// drop rules that were running. The grammar is checked as by ParseFile.
func ParseSaved(filename string, src []byte) (*File, error) {
	return parseWith(filename, src, &errs{saved: true})
}

func parseWith(filename string, src []byte, e *errs) (*File, error) {
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf")) // editors on Windows add a BOM
	var f *File
	if t := bytes.TrimLeft(src, " \t\r\n"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		f = parseJSON(filename, src, e)
	} else {
		f = parseText(filename, string(src), e)
	}
	checkNames(f.Rules, "rule", func(r *Rule) (string, Pos, string) { return r.Name, r.Pos, r.String() }, e)
	checkNames(f.Inhibits, "inhibit rule", func(in *Inhibit) (string, Pos, string) { return in.Name, in.Pos, in.String() }, e)
	if !e.saved {
		checkWindows(f.Rules, e)
	}
	if err := e.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// Parse reads a rules file like ParseFile and returns its rules. The
// file's inhibit rules are checked but not returned: a caller that applies
// them uses ParseFile.
func Parse(filename string, src []byte) ([]*Rule, error) {
	f, err := ParseFile(filename, src)
	if err != nil {
		return nil, err
	}
	return f.Rules, nil
}

// checkNames reports a name used twice, at the second use. what names the
// kind of block; id gives a block's name, place and canonical text.
func checkNames[T any](blocks []T, what string, id func(T) (string, Pos, string), e *errs) {
	type first struct {
		pos  Pos
		text string
	}
	seen := make(map[string]first, len(blocks))
	for _, b := range blocks {
		name, pos, text := id(b)
		f, dup := seen[name]
		if !dup {
			seen[name] = first{pos, text}
			continue
		}
		hint := "give each " + what + " its own name"
		if f.text == text {
			hint = "the two " + what + "s are the same; remove one"
		}
		e.add(&Error{Pos: pos, Msg: fmt.Sprintf("duplicate %s name %s (first at %d:%d)", what, name, f.pos.Line, f.pos.Col), Hint: hint})
	}
}

// checkWindows reports the first rate rule that makes the file read more
// than MaxWindows different windows, at its WINDOW.
func checkWindows(rs []*Rule, e *errs) {
	type table struct{ window, offset time.Duration }
	seen := map[table]bool{}
	for _, r := range rs {
		if r == nil || r.IsEvent() {
			continue
		}
		seen[table{r.Window, 0}] = true
		if r.Expr.UsesPrevious() {
			seen[table{r.Window, r.Window}] = true
		}
		if len(seen) <= MaxWindows {
			continue
		}
		pos := r.windowPos
		if !pos.IsValid() {
			pos = r.Pos
		}
		e.add(&Error{Pos: pos, Msg: fmt.Sprintf("rule %s: WINDOW %s makes %d different windows in this file, over the limit of %d (each is read for every job at every evaluation)",
			r.Name, formatDuration(r.Window), len(seen), MaxWindows),
			Expected: "a WINDOW another rule of the file uses",
			Hint:     "give rules the same few WINDOWs (1m, 5m, 1h); a rule with pct_change reads its WINDOW and the one before it, two windows"})
		return
	}
}

// CheckChannels reports every NOTIFY entry that known does not recognise,
// at its place in the file. Parse cannot do this: channels live in the
// server's configuration.
func CheckChannels(rs []*Rule, known func(name string) bool) error {
	e := &errs{}
	for _, r := range rs {
		for i, name := range r.Notify {
			if known(name) {
				continue
			}
			pos := r.Pos
			if i < len(r.notifyPos) {
				pos = r.notifyPos[i]
			}
			e.add(&Error{Pos: pos, Msg: fmt.Sprintf("rule %s notifies unknown channel %q", r.Name, name),
				Expected: "a channel from the configuration", Hint: "configure a channel with this name, or fix the spelling"})
		}
	}
	return e.err()
}

// CheckReach reports every rate rule that reads further back than kept,
// how long the metrics are kept (retention.rollups): a WINDOW longer than
// it, or, with pct_change, a WINDOW and the window before it together.
// Older data is gone and reads as no runs, so such a rule would decide on
// part of its window: a pct_change over 18h with a day kept compares 18
// hours with the 6 of the 18 before them that remain, and fires on steady
// traffic; over 24h the window before is empty and it never fires.
func CheckReach(rs []*Rule, kept time.Duration) error {
	e := &errs{}
	for _, r := range rs {
		if r.IsEvent() {
			continue
		}
		reach, limit, what := r.Window, kept, "WINDOW "+formatDuration(r.Window)
		if r.Expr.UsesPrevious() {
			reach *= 2
			limit = kept / 2 / (10 * time.Second) * (10 * time.Second)
			what += " with pct_change, which compares it with the " + formatDuration(r.Window) + " before it,"
		}
		if reach <= kept {
			continue
		}
		pos := r.windowPos
		if !pos.IsValid() {
			pos = r.Pos
		}
		e.add(&Error{Pos: pos, Msg: fmt.Sprintf("rule %s: %s reads %s back, but the metrics are kept %s", r.Name, what, formatDuration(reach), formatDuration(kept)),
			Expected: "a WINDOW of at most " + formatDuration(limit),
			Hint:     "shorten the WINDOW, or keep the metrics longer (retention.rollups in the configuration)"})
	}
	return e.err()
}
