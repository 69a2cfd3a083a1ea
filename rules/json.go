package rules

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// jsonRule is the JSON form, field for field. Both kinds write every field
// that applies to them, defaults included, like the text form.
type jsonRule struct {
	Name        string            `json:"name"`
	TaskPrefix  string            `json:"taskPrefix"`
	Window      string            `json:"window,omitempty"`
	Threshold   string            `json:"threshold,omitempty"`
	Duration    string            `json:"duration,omitempty"`
	Keep        string            `json:"keep,omitempty"`
	By          string            `json:"by,omitempty"`
	On          []string          `json:"on,omitempty"`
	GroupWindow string            `json:"groupWindow,omitempty"`
	Severity    apollo.Severity   `json:"severity"`
	Notify      []string          `json:"notify,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// MarshalJSON writes the JSON form; UnmarshalJSON or Parse read it back
// into an equal rule.
func (r *Rule) MarshalJSON() ([]byte, error) {
	j := jsonRule{Name: r.Name, TaskPrefix: r.Prefix, Severity: r.Severity, Notify: r.Notify, Labels: r.Labels}
	if r.IsEvent() {
		j.On, j.GroupWindow = r.onNames(), formatDuration(r.GroupWindow)
	} else {
		j.Window, j.Threshold, j.By = formatDuration(r.Window), r.Expr.String(), r.By
		j.Duration, j.Keep = formatDuration(r.Duration), formatDuration(r.Keep)
	}
	return encodeJSON(j, "rule "+r.Name)
}

// encodeJSON writes one JSON object without escaping < > &, so that
// "failed_rate > 0.05" stays readable.
func encodeJSON(v any, what string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("rules: encode %s: %w", what, err)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// UnmarshalJSON reads one rule object, with the same checks as Parse.
// Positions in errors count from the start of the object.
func (r *Rule) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil // encoding/json's convention: null leaves the value alone
	}
	e := &errs{}
	jr := parseJSONWith("", b, e, func(jr *jsonReader) { jr.rules = append(jr.rules, jr.rule("")) })
	if err := e.err(); err != nil {
		return err
	}
	*r = *jr.rules[0]
	return nil
}

func parseJSON(file string, src []byte, e *errs) *File {
	jr := parseJSONWith(file, src, e, func(jr *jsonReader) {
		if t, _ := jr.token(); t == json.Delim('[') {
			jr.ruleArray("")
			return
		}
		jr.wrapper()
	})
	return &File{Rules: jr.rules, Inhibits: jr.inhibits}
}

// parseJSONWith checks the syntax first, with the exact place of the first
// mistake, and only then walks the tokens, so the walk meets no syntax
// errors and can give every problem a place and a JSON path. The walk
// leaves what it read in the reader's rules and inhibits.
func parseJSONWith(file string, src []byte, e *errs, walk func(*jsonReader)) *jsonReader {
	jr := &jsonReader{src: src, file: file, errs: e, dec: json.NewDecoder(bytes.NewReader(src)), lastPos: Pos{File: file, Line: 1, Col: 1}}
	if !json.Valid(src) {
		var se *json.SyntaxError
		err := json.Unmarshal(src, new(json.RawMessage))
		if !errors.As(err, &se) {
			e.add(&Error{Pos: jr.posAt(len(src)), Msg: "invalid JSON"})
			return jr
		}
		e.add(&Error{Pos: jr.posAt(max(int(se.Offset)-1, 0)), Msg: "invalid JSON: " + se.Error()})
		return jr
	}
	jr.dec.UseNumber()
	walk(jr)
	return jr
}

// jsonReader walks a valid JSON document token by token, knowing the byte
// offset, and so the line and column, of every key and value.
type jsonReader struct {
	src     []byte
	file    string
	dec     *json.Decoder
	errs    *errs
	lastOff int // posAt moves forward from here: offsets only grow
	lastPos Pos
	broken  bool

	rules    []*Rule
	inhibits []*Inhibit
}

func (jr *jsonReader) posAt(off int) Pos {
	if off < jr.lastOff {
		jr.lastOff, jr.lastPos = 0, Pos{File: jr.file, Line: 1, Col: 1}
	}
	p, i := jr.lastPos, jr.lastOff
	for i < off && i < len(jr.src) {
		if jr.src[i] == '\n' {
			p.Line, p.Col = p.Line+1, 1
			i++
			continue
		}
		_, n := utf8.DecodeRune(jr.src[i:])
		i += n
		p.Col++
	}
	jr.lastOff, jr.lastPos = i, p
	return p
}

// token returns the next token and the offset where it starts: the
// decoder reports where the previous token ended, so separators are skipped.
func (jr *jsonReader) token() (json.Token, int) {
	off := int(jr.dec.InputOffset())
	for off < len(jr.src) && strings.IndexByte(" \t\r\n,:", jr.src[off]) >= 0 {
		off++
	}
	t, err := jr.dec.Token()
	if err != nil && !jr.broken {
		// The document is valid, so this is a bug in the walk: report it
		// rather than loop or panic.
		jr.broken = true
		jr.errs.add(&Error{Pos: jr.posAt(off), Msg: "reading JSON: " + err.Error()})
	}
	return t, off
}

// more reports whether the current array or object has another element.
func (jr *jsonReader) more() bool { return !jr.broken && jr.dec.More() }

// skip consumes the rest of a value whose first token is t.
func (jr *jsonReader) skip(t json.Token) {
	for depth := 0; !jr.broken; t, _ = jr.token() {
		switch t {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
		if depth <= 0 {
			return
		}
	}
}

func describeJSON(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "string " + clip(v)
	case json.Number:
		return "number " + v.String()
	case bool:
		return fmt.Sprint(v)
	}
	return "null"
}

// wrapper reads {"rules": [...], "inhibits": [...]}.
func (jr *jsonReader) wrapper() {
	first := map[json.Token]Pos{}
	for jr.more() {
		k, off := jr.token()
		if k == "rules" || k == "inhibits" {
			// Other JSON readers keep the last of two keys, this one read
			// both: a text that meant one thing to a tool, another here.
			// A text saved before this check loads as it ran.
			at := jr.posAt(off)
			if p, ok := first[k]; ok && !jr.errs.saved {
				jr.errs.add(&Error{Pos: at, Msg: fmt.Sprintf("%s given twice in the top-level object", k),
					Hint: fmt.Sprintf("the first is at %d:%d; keep one, with every rule in it", p.Line, p.Col)})
			} else if !ok {
				first[k] = at
			}
		}
		t, voff := jr.token()
		switch {
		case k != "rules" && k != "inhibits":
			jr.unknown(k, jr.posAt(off), "the top-level object", "rules", "inhibits")
			jr.skip(t)
		case t == json.Delim('[') && k == "rules":
			jr.ruleArray("rules")
		case t == json.Delim('['):
			jr.inhibitArray("inhibits")
		case t != nil:
			what := map[json.Token]string{"rules": "rule", "inhibits": "inhibit rule"}[k]
			jr.errs.add(&Error{Pos: jr.posAt(voff), Msg: fmt.Sprint(k) + " is " + describeJSON(t), Expected: "an array of " + what + " objects"})
			jr.skip(t)
		}
	}
	jr.token() // }
}

func (jr *jsonReader) ruleArray(path string) {
	for i := 0; jr.more(); i++ {
		if r := jr.rule(fmt.Sprintf("%s[%d]", path, i)); r != nil {
			jr.rules = append(jr.rules, r)
		}
	}
	jr.token() // ]
}

func (jr *jsonReader) inhibitArray(path string) {
	for i := 0; jr.more(); i++ {
		if in := jr.inhibit(fmt.Sprintf("%s[%d]", path, i)); in != nil {
			jr.inhibits = append(jr.inhibits, in)
		}
	}
	jr.token() // ]
}

func (jr *jsonReader) unknown(name json.Token, at Pos, where string, fields ...string) {
	hint := suggest(fmt.Sprint(name), fields...)
	if hint == "" {
		hint = "fields are " + strings.Join(fields, ", ")
	}
	jr.errs.add(&Error{Pos: at, Msg: fmt.Sprintf("unknown field %s in %s", clip(fmt.Sprint(name)), where), Expected: "a known field", Hint: hint})
}

var (
	ruleFields    = append([]string{"name"}, jsonKeys[:numKeys]...)
	inhibitFields = append([]string{"name"}, jsonKeys[numKeys:]...)
)

// object reads the { that starts an object at path, or reports what is
// there instead and skips it. name stands for an empty path ("rule");
// expected says what should be there ("a rule object").
func (jr *jsonReader) object(path, name, expected string) (Pos, bool) {
	t, off := jr.token()
	if t != json.Delim('{') {
		jr.errs.add(&Error{Pos: jr.posAt(off), Msg: cmp.Or(path, name) + " is " + describeJSON(t), Expected: expected + " {...}"})
		jr.skip(t)
		return Pos{}, false
	}
	return jr.posAt(off), true
}

// rule reads one rule object at path.
func (jr *jsonReader) rule(path string) *Rule {
	at, ok := jr.object(path, "rule", "a rule object")
	if !ok {
		return nil
	}
	b := newBuilder(at, jr.errs, true, path)
	for jr.more() {
		name, off := jr.token()
		s, _ := name.(string) // keys are strings in a valid document
		jr.field(b, s, jr.posAt(off))
	}
	jr.token() // }
	if jr.broken {
		return nil
	}
	return b.finish()
}

// field reads one field of a rule. In JSON null, "", [] and {} mean "not
// given", so that forms that send every field work; taskPrefix is the
// exception, because "" there means every job.
func (jr *jsonReader) field(b *builder, name string, at Pos) {
	if name == "name" {
		if s, off, _ := jr.str(b, kBlock); s != "" {
			b.name(s, jr.posAt(off))
		}
		return
	}
	k := key(slices.Index(jsonKeys[:], name))
	if k >= numKeys {
		jr.unknown(name, at, cmp.Or(b.path, "the rule"), ruleFields...)
		t, _ := jr.token()
		jr.skip(t)
		return
	}
	switch k {
	case kNotify, kOn:
		items := jr.strs(b, k)
		if len(items) > 0 {
			b.key(k, at)
		}
		add := b.notify
		if k == kOn {
			add = b.on
		}
		for _, it := range items {
			add(it.s, it.pos)
		}
		return
	case kLabels:
		items := jr.strMap(b)
		if len(items) > 0 {
			b.key(k, at)
		}
		for _, it := range items {
			b.label(it.k, it.s, it.pos)
		}
		return
	}
	s, off, given := jr.str(b, k)
	if !given || s == "" && k != kPrefix {
		return
	}
	b.key(k, at)
	pos := jr.posAt(off)
	switch k {
	case kPrefix:
		b.prefix(s, pos)
	case kThreshold:
		if x := jr.threshold(b, s, off); x != nil {
			b.threshold(x)
		}
	case kSeverity:
		b.severity(s, pos)
	case kBy:
		b.by(s, pos)
	default:
		b.duration(k, s, pos)
	}
}

// str reads a string field; null is "not given". k names the field in
// errors (kBlock: the rule's name).
func (jr *jsonReader) str(b *builder, k key) (s string, off int, given bool) {
	t, off := jr.token()
	switch v := t.(type) {
	case string:
		return v, off, true
	case nil:
		return "", off, false
	}
	jr.typeError(b, k, t, off, "a string")
	return "", off, false
}

func (jr *jsonReader) typeError(b *builder, k key, t json.Token, off int, expected string) {
	field := "name"
	if k < allKeys {
		field = jsonKeys[k]
	}
	jr.errs.add(&Error{Pos: jr.posAt(off), Msg: joinPath(b.path, field) + " is " + describeJSON(t), Expected: expected})
	jr.skip(t)
}

type jsonItem struct {
	k, s string
	pos  Pos
	off  int // where the string starts in the source
}

// strs reads an array of strings; null is empty.
func (jr *jsonReader) strs(b *builder, k key) []jsonItem {
	t, off := jr.token()
	if t != json.Delim('[') {
		if t != nil {
			jr.typeError(b, k, t, off, "an array of strings")
		}
		return nil
	}
	var items []jsonItem
	for jr.more() {
		t, off := jr.token()
		if s, ok := t.(string); ok {
			items = append(items, jsonItem{s: s, pos: jr.posAt(off), off: off})
		} else {
			jr.typeError(b, k, t, off, "a string")
		}
	}
	jr.token() // ]
	return items
}

// strMap reads an object of strings; null is empty.
func (jr *jsonReader) strMap(b *builder) []jsonItem {
	t, off := jr.token()
	if t != json.Delim('{') {
		if t != nil {
			jr.typeError(b, kLabels, t, off, "an object of strings")
		}
		return nil
	}
	var items []jsonItem
	for jr.more() {
		k, koff := jr.token()
		v, voff := jr.token()
		if s, ok := v.(string); ok {
			name, _ := k.(string)
			items = append(items, jsonItem{k: name, s: s, pos: jr.posAt(koff)})
		} else {
			jr.typeError(b, kLabels, v, voff, "a string")
		}
	}
	jr.token() // }
	return items
}

// threshold parses the expression in a JSON string that starts at off.
func (jr *jsonReader) threshold(b *builder, s string, off int) *Expr {
	var x *Expr
	jr.embedded(b, kThreshold, s, off, func(at Pos) { x = parseExprAt(s, at, jr.errs) })
	return x
}

// embedded parses text of the text form written in a JSON string that
// starts at off (a threshold, a matcher). Errors point into the string
// when it has no escapes, so that columns match; otherwise at the string
// itself.
func (jr *jsonReader) embedded(b *builder, k key, s string, off int, parse func(at Pos)) {
	raw := jr.src[off+1:]
	exact := len(raw) > len(s) && string(raw[:len(s)]) == s && raw[len(s)] == '"'
	mark := jr.errs.n()
	parse(jr.posAt(off + 1))
	for _, e := range jr.errs.list[mark:] {
		e.Msg = b.at(k) + e.Msg
		if !exact {
			e.Pos = jr.posAt(off)
		}
	}
}

// inhibit reads one inhibit rule object at path.
func (jr *jsonReader) inhibit(path string) *Inhibit {
	at, ok := jr.object(path, "inhibit", "an inhibit rule object")
	if !ok {
		return nil
	}
	b := newInhibitBuilder(at, jr.errs, true, path)
	for jr.more() {
		name, off := jr.token()
		s, _ := name.(string)
		at := jr.posAt(off)
		k := key(slices.Index(jsonKeys[:], s))
		switch {
		case s == "name":
			if s, off, _ := jr.str(b, kBlock); s != "" {
				b.name(s, jr.posAt(off))
			}
		case k < kSource || k >= allKeys:
			jr.unknown(s, at, cmp.Or(b.path, "the inhibit rule"), inhibitFields...)
			t, _ := jr.token()
			jr.skip(t)
		default:
			items := jr.strs(b, k)
			if len(items) > 0 {
				b.key(k, at)
			}
			for _, it := range items {
				if k == kEqual {
					b.equal(it.s, it.pos)
					continue
				}
				var m Matcher
				var ok bool
				jr.embedded(b, k, it.s, it.off, func(at Pos) { m, ok = parseMatcherAt(it.s, at, jr.errs) })
				if ok {
					b.matcher(k, m, it.pos)
				}
			}
		}
	}
	jr.token() // }
	if jr.broken {
		return nil
	}
	return b.finishInhibit()
}
