package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/apollo-11/apollo"
)

// Inhibit is an inhibit rule: while an alert that matches Source fires,
// the alerts that match Target, and agree with it on every name in Equal,
// are held (shown as inhibited, not notified). It is how the echoes of a
// cause stay quiet: "while the warehouse load fails, hold the report
// jobs' alerts".
//
//	INHIBIT warehouse_down
//	  SOURCE: rule=warehouse_load_failed
//	  TARGET: task_prefix="report_", severity!=critical
//	  EQUAL:  team
type Inhibit struct {
	Name   string
	Source []Matcher
	Target []Matcher
	Equal  []string // label names, or group
	Pos    Pos      // where the inhibit rule starts
}

// Matcher tests one property of an alert. Name is rule (the alert's rule
// name), severity, group (the alert's group: the job with BY: name, or
// the rule's prefix), task_prefix (the group starts with Value), or else
// the name of a label. Not makes it "!=": the property is not Value (or
// the group does not start with it).
type Matcher struct {
	Name  string
	Value string
	Not   bool
}

// The matcher names that are not labels.
const (
	matchRule     = "rule"
	matchSeverity = "severity"
	matchGroup    = "group"
	matchPrefix   = "task_prefix"
)

// Matches reports whether the alert has the property.
func (m Matcher) Matches(a *apollo.Alert) bool {
	v := property(a, m.Name)
	ok := v == m.Value
	if m.Name == matchPrefix {
		ok = strings.HasPrefix(v, m.Value)
	}
	return ok != m.Not
}

// property is what a matcher or EQUAL name reads from an alert; a label
// the alert does not have is "".
func property(a *apollo.Alert, name string) string {
	switch name {
	case matchRule:
		return a.Rule
	case matchSeverity:
		return string(a.Severity)
	case matchGroup, matchPrefix:
		return a.Group
	}
	return a.Labels[name]
}

// String writes the matcher as the text form does: severity!=critical,
// task_prefix="report_".
func (m Matcher) String() string {
	op := "="
	if m.Not {
		op = "!="
	}
	v := m.Value
	if !isIdent(v) || isBlockName(v) {
		v = quote(v)
	}
	return m.Name + op + v
}

func matchAll(ms []Matcher, a *apollo.Alert) bool {
	for _, m := range ms {
		if !m.Matches(a) {
			return false
		}
	}
	return true
}

// Inhibits reports whether source, firing, holds target under this rule.
// An alert never holds itself or an alert of another tenant; and, as in
// Alertmanager, two alerts that each match both Source and Target do not
// hold each other, so that a rule cannot silence every alert it covers.
func (in *Inhibit) Inhibits(source, target *apollo.Alert) bool {
	switch {
	case source.State != apollo.AlertFiring, source.Tenant != target.Tenant,
		source.ID == target.ID && source.Rule == target.Rule && source.Group == target.Group,
		!matchAll(in.Source, source), !matchAll(in.Target, target):
		return false
	}
	for _, name := range in.Equal {
		if property(source, name) != property(target, name) {
			return false
		}
	}
	return !(matchAll(in.Source, target) && matchAll(in.Target, source))
}

// InhibitedBy returns the first inhibit rule, and the first of the firing
// alerts, that hold target; nil and nil when none does. The engine calls
// it for each alert it would notify, with the tenant's firing alerts. It
// costs O(rules × firing alerts).
func InhibitedBy(ins []*Inhibit, target *apollo.Alert, firing []apollo.Alert) (*Inhibit, *apollo.Alert) {
	for _, in := range ins {
		if !in.Targets(target) {
			continue
		}
		for i := range firing {
			if in.Inhibits(&firing[i], target) {
				return in, &firing[i]
			}
		}
	}
	return nil, nil
}

// String is the canonical text of the inhibit rule, on one line:
// ParseFile of it gives an equal inhibit rule.
func (in *Inhibit) String() string {
	var b strings.Builder
	b.WriteString("INHIBIT ")
	if in.Name != "" {
		b.WriteString(in.Name + " ")
	}
	b.WriteString("SOURCE: " + joinMatchers(in.Source))
	b.WriteString(" TARGET: " + joinMatchers(in.Target))
	if len(in.Equal) > 0 {
		b.WriteString(" EQUAL: " + strings.Join(in.Equal, ", "))
	}
	return b.String()
}

func joinMatchers(ms []Matcher) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return strings.Join(parts, ", ")
}

// jsonInhibit is the JSON form: matchers are strings in the text form's
// syntax, as a threshold is.
type jsonInhibit struct {
	Name   string   `json:"name"`
	Source []string `json:"source"`
	Target []string `json:"target"`
	Equal  []string `json:"equal,omitempty"`
}

// MarshalJSON writes the JSON form; UnmarshalJSON or ParseFile read it
// back into an equal inhibit rule.
func (in *Inhibit) MarshalJSON() ([]byte, error) {
	j := jsonInhibit{Name: in.Name, Equal: in.Equal}
	for _, m := range in.Source {
		j.Source = append(j.Source, m.String())
	}
	for _, m := range in.Target {
		j.Target = append(j.Target, m.String())
	}
	return encodeJSON(j, "inhibit rule "+in.Name)
}

// UnmarshalJSON reads one inhibit rule object, with the same checks as
// ParseFile. Positions in errors count from the start of the object.
func (in *Inhibit) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	e := &errs{}
	jr := parseJSONWith("", b, e, func(jr *jsonReader) { jr.inhibits = append(jr.inhibits, jr.inhibit("")) })
	if err := e.err(); err != nil {
		return err
	}
	*in = *jr.inhibits[0]
	return nil
}

// matcher checks one matcher of SOURCE or TARGET and adds it.
func (b *builder) matcher(k key, m Matcher, pos Pos) {
	list := &b.in.Source
	if k == kTarget {
		list = &b.in.Target
	}
	special := false
	for _, n := range []string{matchRule, matchSeverity, matchGroup, matchPrefix} {
		if strings.EqualFold(m.Name, n) {
			m.Name, special = n, true
		}
	}
	switch {
	case len(*list) == maxItems:
		b.fail(pos, k, "too many matchers", fmt.Sprintf("at most %d", maxItems), "")
	case !special && !validName(m.Name):
		b.fail(pos, k, fmt.Sprintf("invalid label name %s", clip(m.Name)), nameForm, "rule, severity, group and task_prefix match the alert itself; other names match its labels")
	case m.Name == matchSeverity && !b.severityValue(&m, pos, k):
	case m.Name == matchRule && !validName(m.Value):
		b.fail(pos, k, fmt.Sprintf("invalid rule name %s", clip(m.Value)), nameForm, "")
	case !b.labelValue(m.Name, m.Value, pos, k):
	case !b.text(m.Value, pos, k):
	case slices.Contains(*list, m):
		b.fail(pos, k, fmt.Sprintf("matcher %s listed twice", m), "", "")
	default:
		*list = append(*list, m)
	}
}

// severityValue checks and canonicalises the value of a severity matcher.
func (b *builder) severityValue(m *Matcher, pos Pos, k key) bool {
	for _, v := range []apollo.Severity{apollo.SeverityInfo, apollo.SeverityWarning, apollo.SeverityCritical} {
		if strings.EqualFold(m.Value, string(v)) {
			m.Value = string(v)
			return true
		}
	}
	b.fail(pos, k, fmt.Sprintf("unknown severity %s", clip(m.Value)), "info, warning or critical", suggest(m.Value, "info", "warning", "critical"))
	return false
}

// equal adds a name to EQUAL.
func (b *builder) equal(s string, pos Pos) {
	switch {
	case len(b.in.Equal) == maxItems:
		b.fail(pos, kEqual, "too many names", fmt.Sprintf("at most %d", maxItems), "")
	case s != matchGroup && !validName(s):
		b.fail(pos, kEqual, fmt.Sprintf("invalid label name %s", clip(s)), "a label name, or group", "")
	case slices.Contains(b.in.Equal, s):
		b.fail(pos, kEqual, fmt.Sprintf("%s listed twice", s), "", "")
	default:
		b.in.Equal = append(b.in.Equal, s)
	}
}

// finishInhibit checks that SOURCE and TARGET are there and names an
// unnamed inhibit rule. It returns nil if anything was wrong.
func (b *builder) finishInhibit() *Inhibit {
	if b.errs.n() == b.mark {
		for _, k := range []key{kSource, kTarget} {
			if !b.given[k].IsValid() {
				b.fail(b.in.Pos, kBlock, "inhibit rule has no "+b.keyName(k), b.keyName(k)+": and a matcher such as severity=critical",
					"SOURCE says which firing alerts hold others, TARGET which alerts they hold")
			}
		}
	}
	if b.errs.n() > b.mark {
		return nil
	}
	if b.in.Name == "" { // named after its meaning, as a rule is
		sum := sha256.Sum256([]byte(b.in.String()))
		b.in.Name = "inhibit_" + hex.EncodeToString(sum[:4])
	}
	return b.in
}

// Targets reports whether target matches the rule's TARGET: whether some
// firing alert could hold it under this rule.
func (in *Inhibit) Targets(target *apollo.Alert) bool { return matchAll(in.Target, target) }

// MayHaveInhibits reports whether src may hold inhibit rules: false when
// the word inhibit appears nowhere in it, in any case (neither the INHIBIT
// keyword nor the JSON form's "inhibits"), and no \u escape could spell
// the JSON key otherwise. A caller that needs only the inhibit rules of a
// file already accepted skips parsing it again, which for a large file
// costs many times its size.
func MayHaveInhibits(src []byte) bool {
	const word = "inhibit"
	if bytes.Contains(src, []byte(`\u`)) {
		return true
	}
	for i := 0; i+len(word) <= len(src); i++ {
		if c := src[i]; (c == 'i' || c == 'I') && bytes.EqualFold(src[i:i+len(word)], []byte(word)) {
			return true
		}
	}
	return false
}
