package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// key is a clause of a rule or of an inhibit rule. The text and JSON
// forms spell keys differently; both feed the same builder, so a rule
// means the same and is checked the same whichever form it came in.
type key uint8

const (
	kPrefix key = iota
	kWindow
	kThreshold
	kDuration
	kKeep
	kBy
	kOn
	kGroupWindow
	kSeverity
	kNotify
	kLabels

	numKeys // the keys of RULE end here; those of INHIBIT follow
)

const (
	kSource key = numKeys + iota
	kTarget
	kEqual

	allKeys
	kBlock = allKeys // not a key: the rule or inhibit rule as a whole
)

var (
	textKeys = [allKeys]string{"task_prefix", "WINDOW", "THRESHOLD", "DURATION", "KEEP", "BY", "ON", "GROUP_WINDOW", "SEVERITY", "NOTIFY", "LABELS",
		"SOURCE", "TARGET", "EQUAL"}
	jsonKeys = [allKeys]string{"taskPrefix", "window", "threshold", "duration", "keep", "by", "on", "groupWindow", "severity", "notify", "labels",
		"source", "target", "equal"}
)

// lookupKey finds a text key of a block (keys from lo up to hi), ignoring
// case.
func lookupKey(s string, lo, hi key) (key, bool) {
	for k := lo; k < hi; k++ {
		if strings.EqualFold(textKeys[k], s) {
			return k, true
		}
	}
	return 0, false
}

// builder assembles one rule (or, with in set, one inhibit rule) from
// clauses, checks each value, and at the end checks the combination and
// fills in defaults.
type builder struct {
	r     *Rule
	in    *Inhibit
	errs  *errs
	mark  int  // errors before this block; more at the end means none
	json  bool // messages use JSON names and paths
	path  string
	given [allKeys]Pos
}

func newBuilder(at Pos, e *errs, json bool, path string) *builder {
	return &builder{r: &Rule{Pos: at}, errs: e, mark: e.n(), json: json, path: path}
}

func newInhibitBuilder(at Pos, e *errs, json bool, path string) *builder {
	return &builder{in: &Inhibit{Pos: at}, errs: e, mark: e.n(), json: json, path: path}
}

// keyName spells k as the user wrote it.
func (b *builder) keyName(k key) string {
	if b.json {
		return jsonKeys[k]
	}
	return textKeys[k]
}

// at prefixes a JSON message with the path of the field; text messages
// have the line and column, which say enough.
func (b *builder) at(k key) string {
	if !b.json {
		return ""
	}
	if k == kBlock {
		what := "rule"
		if b.in != nil {
			what = "inhibit"
		}
		return cmp.Or(b.path, what) + ": "
	}
	return joinPath(b.path, jsonKeys[k]) + ": "
}

func (b *builder) fail(pos Pos, k key, msg, expected, hint string) {
	b.errs.add(&Error{Pos: pos, Msg: b.at(k) + msg, Expected: expected, Hint: hint})
}

// key records that k was given; a second time is an error.
func (b *builder) key(k key, pos Pos) {
	if first := b.given[k]; first.IsValid() {
		b.fail(pos, k, b.keyName(k)+" given twice in one rule", "", fmt.Sprintf("the first is at %d:%d; keep one", first.Line, first.Col))
		return
	}
	b.given[k] = pos
}

// validName checks a rule, channel or label name. RULE and INHIBIT are
// reserved: "NOTIFY: a,\nRULE ..." must not read as a channel named RULE.
func validName(s string) bool {
	return isIdent(s) && !isBlockName(s) && len(s) <= apollo.MaxNameBytes
}

func isBlockName(s string) bool {
	return strings.EqualFold(s, "rule") || strings.EqualFold(s, "inhibit")
}

const nameForm = "letters, digits, _ . - starting with a letter or _, not RULE or INHIBIT"

// blockName is the name of the rule or inhibit rule being built.
func (b *builder) blockName() string {
	if b.in != nil {
		return b.in.Name
	}
	return b.r.Name
}

func (b *builder) name(s string, pos Pos) {
	what := "rule"
	if b.in != nil {
		what = "inhibit rule"
	}
	if isIdent(s) && len(s) > apollo.MaxNameBytes {
		b.fail(pos, kBlock, fmt.Sprintf("%s name %s is too long", what, clip(s)), fmt.Sprintf("at most %d bytes", apollo.MaxNameBytes), "")
		return
	}
	if !validName(s) {
		b.fail(pos, kBlock, fmt.Sprintf("invalid %s name %s", what, clip(s)), nameForm, "")
		return
	}
	if b.in != nil {
		b.in.Name = s
	} else {
		b.r.Name = s
	}
}

// text checks a string that the text form must be able to write back.
func (b *builder) text(s string, pos Pos, k key) bool {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		b.fail(pos, k, fmt.Sprintf("%s %s holds control characters or invalid UTF-8", b.keyName(k), clip(s)), "printable text", "")
		return false
	}
	return true
}

func (b *builder) prefix(s string, pos Pos) {
	if len(s) > apollo.MaxNameBytes {
		b.fail(pos, kPrefix, fmt.Sprintf("%s is %d bytes long", b.keyName(kPrefix), len(s)), fmt.Sprintf("at most %d, the longest job name", apollo.MaxNameBytes), "")
		return
	}
	if b.text(s, pos, kPrefix) {
		b.r.Prefix = s
	}
}

func (b *builder) duration(k key, s string, pos Pos) {
	d, e := parseDuration(s)
	if e != nil {
		e.Pos, e.Msg = pos, b.at(k)+e.Msg
		b.errs.add(e)
		return
	}
	switch {
	case k == kWindow && (d < 10*time.Second || d%(10*time.Second) != 0):
		msg := fmt.Sprintf("%s %s is not a multiple of 10s", b.keyName(k), s)
		if d < 10*time.Second {
			msg = fmt.Sprintf("%s %s is too short", b.keyName(k), s)
		}
		b.fail(pos, k, msg, "10s to 24h in steps of 10s", "metrics are kept in 10-second buckets")
		return
	case k == kGroupWindow && d < time.Second:
		b.fail(pos, k, fmt.Sprintf("%s %s is too short", b.keyName(k), s), "1s to 24h", "")
		return
	}
	switch k {
	case kWindow:
		b.r.Window, b.r.windowPos = d, pos
	case kDuration:
		b.r.Duration = d
	case kKeep:
		b.r.Keep = d
	default:
		b.r.GroupWindow = d
	}
}

func (b *builder) threshold(x *Expr) { b.r.Expr = x }

func (b *builder) severity(s string, pos Pos) {
	for _, v := range []apollo.Severity{apollo.SeverityInfo, apollo.SeverityWarning, apollo.SeverityCritical} {
		if strings.EqualFold(s, string(v)) {
			b.r.Severity = v
			return
		}
	}
	b.fail(pos, kSeverity, fmt.Sprintf("unknown severity %s", clip(s)), "info, warning or critical", suggest(s, "info", "warning", "critical"))
}

func (b *builder) by(s string, pos Pos) {
	if !strings.EqualFold(s, "name") {
		b.fail(pos, kBy, fmt.Sprintf("%s %s is not supported", b.keyName(kBy), clip(s)), "name", "BY: name evaluates each job name on its own")
		return
	}
	b.r.By = "name"
}

// maxItems bounds NOTIFY and LABELS, which keeps duplicate checks cheap
// on hostile input; real rules use a handful.
const maxItems = 32

func (b *builder) notify(s string, pos Pos) {
	switch {
	case len(b.r.Notify) == maxItems:
		b.fail(pos, kNotify, "too many channels", fmt.Sprintf("at most %d", maxItems), "")
	case !validName(s):
		b.fail(pos, kNotify, fmt.Sprintf("invalid channel name %s", clip(s)), nameForm, "")
	case slices.Contains(b.r.Notify, s):
		b.fail(pos, kNotify, fmt.Sprintf("channel %s listed twice", s), "", "")
	default:
		b.r.Notify = append(b.r.Notify, s)
		b.r.notifyPos = append(b.r.notifyPos, pos)
	}
}

// on adds a status or an occurrence to an event rule.
func (b *builder) on(s string, pos Pos) {
	if st, err := apollo.ParseStatus(strings.ToLower(s)); err == nil {
		if slices.Contains(b.r.On, st) {
			b.fail(pos, kOn, fmt.Sprintf("status %s listed twice", st), "", "")
			return
		}
		b.r.On = append(b.r.On, st)
		return
	}
	if o, ok := ParseOccurrence(s); ok {
		if slices.Contains(b.r.Occurrences, o) {
			b.fail(pos, kOn, fmt.Sprintf("%s listed twice", o), "", "")
			return
		}
		b.r.Occurrences = append(b.r.Occurrences, o)
		return
	}
	names := make([]string, 0, 6)
	for _, v := range apollo.Statuses() {
		names = append(names, v.String())
	}
	hint := suggest(s, append(names, occurrenceNames[1:]...)...)
	if hint == "" {
		hint = b.keyName(kOn) + " also takes what expectations find: " + strings.Join(occurrenceNames[1:], ", ")
	}
	b.fail(pos, kOn, fmt.Sprintf("unknown status %s", clip(s)), strings.Join(names, ", "), hint)
}

// MaxLabelValueBytes bounds a label's value in a rule, and a matcher's in
// an inhibit rule: what a silence can match (alert.CheckSilence). A label
// rides on every notification of its rule, into the channels' bodies and
// outboxes: a value of megabytes made bodies receivers refuse.
const MaxLabelValueBytes = 1024

// labelValue reports whether v, the value of label k, is short enough; it
// says so when it is not.
func (b *builder) labelValue(k, v string, pos Pos, key key) bool {
	if len(v) <= MaxLabelValueBytes || b.errs.saved {
		return true
	}
	b.fail(pos, key, fmt.Sprintf("the value of %s is %d bytes", k, len(v)),
		fmt.Sprintf("at most %d, as a silence matches", MaxLabelValueBytes), "put a link to the text in the label")
	return false
}

func (b *builder) label(k, v string, pos Pos) {
	switch _, dup := b.r.Labels[k]; {
	case len(b.r.Labels) == maxItems:
		b.fail(pos, kLabels, "too many labels", fmt.Sprintf("at most %d", maxItems), "")
	case !validName(k):
		b.fail(pos, kLabels, fmt.Sprintf("invalid label name %s", clip(k)), nameForm, "")
	case dup:
		b.fail(pos, kLabels, fmt.Sprintf("label %s given twice", k), "", "")
	case !b.labelValue(k, v, pos, kLabels):
	case b.text(v, pos, kLabels):
		if b.r.Labels == nil {
			b.r.Labels = map[string]string{}
		}
		b.r.Labels[k] = v
	}
}

// finish checks the clauses together, fills in defaults and names an
// unnamed rule. It returns nil if anything in the rule was wrong.
func (b *builder) finish() *Rule {
	r, g := b.r, &b.given
	rate, event := g[kThreshold].IsValid(), g[kOn].IsValid()
	// A broken clause may have swallowed the next ones (an unterminated
	// string eats the line), so only a clean rule is told what it lacks.
	clean := b.errs.n() == b.mark
	if !g[kPrefix].IsValid() && clean {
		b.fail(r.Pos, kBlock, "rule has no "+b.keyName(kPrefix), b.keyName(kPrefix)+`: "..."`, b.keyName(kPrefix)+` "" matches every job`)
	}
	kt, ko := b.keyName(kThreshold), b.keyName(kOn)
	switch {
	case rate && event:
		b.fail(later(g[kThreshold], g[kOn]), kBlock, kt+" and "+ko+" in one rule", "exactly one of them",
			kt+" makes a rate rule and "+ko+" an event rule; write two rules")
	case !rate && !event && clean:
		b.fail(r.Pos, kBlock, "rule has neither "+kt+" nor "+ko, "one of them",
			kt+" watches a rate, as in failed_rate > 5%; "+ko+" fires on events, as in failed, timeout")
	case event:
		for _, k := range []key{kWindow, kDuration, kKeep, kBy} {
			if g[k].IsValid() {
				b.fail(g[k], k, b.keyName(k)+" only applies to "+kt+" rules, and this rule has "+ko, "",
					"an event rule groups matches with "+b.keyName(kGroupWindow))
			}
		}
	case g[kGroupWindow].IsValid():
		b.fail(g[kGroupWindow], kGroupWindow, b.keyName(kGroupWindow)+" only applies to "+ko+" rules, and this rule has "+kt, "",
			"a rate rule uses "+b.keyName(kWindow)+", "+b.keyName(kDuration)+" and "+b.keyName(kKeep))
	}
	if b.errs.n() > b.mark {
		return nil
	}
	if rate {
		r.Window = cmp.Or(r.Window, time.Minute)
	} else {
		r.GroupWindow = cmp.Or(r.GroupWindow, time.Minute)
	}
	r.Severity = cmp.Or(r.Severity, apollo.SeverityWarning)
	if r.Name == "" {
		r.Name = generatedName(r)
	}
	return r
}

func later(a, b Pos) Pos {
	if a.Line > b.Line || a.Line == b.Line && a.Col > b.Col {
		return a
	}
	return b
}

func joinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}
