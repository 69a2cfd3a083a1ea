package rules

import (
	"fmt"
	"slices"
	"strings"
)

// maxDepth bounds nesting of parentheses and not, so that hostile input
// cannot exhaust the stack.
const maxDepth = 32

// parser is one recursive-descent parser for both rule files and
// THRESHOLD expressions. It reads tokens lazily with up to two of
// lookahead: "WINDOW :" starts a clause, "WINDOW" alone does not.
type parser struct {
	lx    *lexer
	ahead []token
	errs  *errs
	depth int
}

func newParser(src string, at Pos, e *errs) *parser {
	return &parser{lx: newLexer(src, at, e), errs: e}
}

func (p *parser) peekAt(n int) token {
	for len(p.ahead) <= n {
		p.ahead = append(p.ahead, p.lx.next())
	}
	return p.ahead[n]
}

func (p *parser) peek() token { return p.peekAt(0) }

func (p *parser) next() token {
	t := p.peek()
	copy(p.ahead, p.ahead[1:])
	p.ahead = p.ahead[:len(p.ahead)-1]
	return t
}

func isWord(t token, w string) bool { return t.kind == tIdent && strings.EqualFold(t.text, w) }

// isBlockWord reports whether t is RULE or INHIBIT.
func isBlockWord(t token) bool { return t.kind == tIdent && isBlockName(t.text) }

// atBlock reports whether a block starts here: RULE or INHIBIT, but not
// "rule=", the matcher of a rule name.
func (p *parser) atBlock() bool { return isBlockWord(p.peek()) && !p.atMatcherOp(1) }

// atMatcherOp reports whether the token n ahead is = or !=.
func (p *parser) atMatcherOp(n int) bool {
	op := p.peekAt(n)
	return op.kind == tAssign || op.kind == tCmp && op.text == "!="
}

// atKey reports whether the next tokens are "IDENT :", the start of a clause.
func (p *parser) atKey() bool { return p.peek().kind == tIdent && p.peekAt(1).kind == tColon }

// atRuleEnd reports whether the current clause ends here.
func (p *parser) atRuleEnd() bool {
	t := p.peek()
	return t.kind == tEOF || p.atBlock() || p.atKey()
}

// fail reports an unexpected token, unless the lexer already reported it.
func (p *parser) fail(t token, expected, hint string) {
	if t.kind != tBad {
		p.errs.add(&Error{Pos: t.pos, Msg: "unexpected " + t.describe(), Expected: expected, Hint: hint})
	}
}

// expect consumes a token of the kind, or reports what was there instead.
// A word followed by a colon is the next key, never a value.
func (p *parser) expect(kind tokKind, expected string) (token, bool) {
	t := p.peek()
	if t.kind != kind || kind == tIdent && (p.atKey() || isBlockWord(t)) {
		p.fail(t, expected, "")
		return t, false
	}
	return p.next(), true
}

// skip drops tokens after an error up to the next clause or block, so
// that one mistake is reported once and the rest of the file is still
// checked.
func (p *parser) skip(toBlock bool) {
	for t := p.peek(); t.kind != tEOF && !p.atBlock() && (toBlock || !p.atKey()); t = p.peek() {
		p.next()
	}
}

func parseText(file, src string, e *errs) *File {
	p := newParser(src, Pos{File: file, Line: 1, Col: 1}, e)
	f := &File{}
	for !e.full() {
		switch t := p.peek(); {
		case t.kind == tEOF:
			return f
		case isWord(t, "rule"):
			b := newBuilder(p.next().pos, p.errs, false, "")
			if p.block(b, "RULE", p.clause) {
				if r := b.finish(); r != nil {
					f.Rules = append(f.Rules, r)
				}
			}
		case isWord(t, "inhibit"):
			b := newInhibitBuilder(p.next().pos, p.errs, false, "")
			if p.block(b, "INHIBIT", p.inhibitClause) {
				if in := b.finishInhibit(); in != nil {
					f.Inhibits = append(f.Inhibits, in)
				}
			}
		default:
			p.fail(t, "RULE or INHIBIT", "every rule starts with the word RULE, every inhibit rule with INHIBIT")
			p.next()
			p.skip(true)
		}
	}
	return f
}

// block parses the rest of RULE [name] { KEY: value } or INHIBIT [name]
// { KEY: value }, handing each clause to clause. It reports whether the
// block ended (rather than the errors filling up).
func (p *parser) block(b *builder, word string, clause func(b *builder, first bool) bool) bool {
	if t := p.peek(); t.kind == tIdent && !isBlockWord(t) && !p.atKey() {
		b.name(p.next().text, t.pos)
	}
	// An unknown key first in a block without a name may be its name,
	// written with a colon.
	for first := b.blockName() == ""; !p.errs.full(); first = false {
		t := p.peek()
		switch {
		case t.kind == tEOF || p.atBlock():
			return true
		case p.atKey():
			if !clause(b, first) {
				p.skip(false)
			}
		default:
			hint := ""
			if t.kind == tIdent {
				hint = "a key ends with a colon, and list items are separated by commas"
			}
			p.fail(t, "a KEY: or "+word, hint)
			p.next()
			p.skip(false)
		}
	}
	return false
}

// unknownKey reports a key that the block does not have. what and word
// name the block: "a rule", RULE.
func (p *parser) unknownKey(kt token, lo, hi key, first bool, what, word string) {
	names := textKeys[lo:hi]
	hint := suggest(kt.text, names...)
	if hint == "" && first {
		hint = what + " name has no colon: " + word + " " + kt.text + " " + names[0] + ": ..."
	} else if hint == "" {
		hint = "keys are " + strings.Join(names, ", ")
	}
	p.errs.add(&Error{Pos: kt.pos, Msg: fmt.Sprintf("unknown key %s", clip(kt.text)), Expected: "a key", Hint: hint})
}

// clause parses one KEY: value of a rule; false means the value was
// malformed and the caller must skip to the next clause.
func (p *parser) clause(b *builder, first bool) bool {
	kt := p.next()
	p.next() // the colon
	k, ok := lookupKey(kt.text, 0, numKeys)
	if !ok {
		p.unknownKey(kt, 0, numKeys, first, "a rule", "RULE")
		return false
	}
	b.key(k, kt.pos)
	switch k {
	case kPrefix:
		t, ok := p.expect(tString, `a quoted prefix such as "batch_"`)
		if ok {
			b.prefix(t.text, t.pos)
		}
		return ok
	case kWindow, kDuration, kKeep, kGroupWindow:
		t, ok := p.expect(tNumber, "a duration such as 5m")
		if ok {
			b.duration(k, t.text, t.pos)
		}
		return ok
	case kThreshold:
		x := p.expr()
		if x != nil && !p.atRuleEnd() {
			p.fail(p.peek(), "and, or, or the next KEY:", "")
			return false
		}
		if x != nil {
			b.threshold(x)
		}
		return x != nil
	case kSeverity:
		t, ok := p.expect(tIdent, "info, warning or critical")
		if ok {
			b.severity(t.text, t.pos)
		}
		return ok
	case kBy:
		t, ok := p.expect(tIdent, "name")
		if ok {
			b.by(t.text, t.pos)
		}
		return ok
	case kNotify:
		return p.list("a channel name", b.notify)
	case kOn:
		return p.list("a status", b.on)
	}
	return p.labels(b)
}

// list parses name, name, ...
func (p *parser) list(what string, add func(string, Pos)) bool {
	for {
		t, ok := p.expect(tIdent, what)
		if !ok {
			return false
		}
		add(t.text, t.pos)
		if p.peek().kind != tComma {
			return true
		}
		p.next()
	}
}

// labels parses key=value, key="value with spaces", ...
func (p *parser) labels(b *builder) bool {
	for {
		k, ok := p.expect(tIdent, "a label such as team=data")
		if !ok {
			return false
		}
		if _, ok := p.expect(tAssign, "= after the label name"); !ok {
			return false
		}
		v := p.peek()
		if v.kind != tIdent && v.kind != tString && v.kind != tNumber || p.atKey() {
			p.fail(v, "a label value: a word or a quoted string", "")
			return false
		}
		b.label(k.text, p.next().text, k.pos)
		if p.peek().kind != tComma {
			return true
		}
		p.next()
	}
}

// inhibitClause parses one KEY: value of an inhibit rule, like clause.
func (p *parser) inhibitClause(b *builder, first bool) bool {
	kt := p.next()
	p.next() // the colon
	k, ok := lookupKey(kt.text, kSource, allKeys)
	if !ok {
		p.unknownKey(kt, kSource, allKeys, first, "an inhibit rule", "INHIBIT")
		return false
	}
	b.key(k, kt.pos)
	if k == kEqual {
		return p.list("a label name, or group", b.equal)
	}
	for {
		m, pos, ok := p.matcher()
		if !ok {
			return false
		}
		b.matcher(k, m, pos)
		if p.peek().kind != tComma {
			return true
		}
		p.next()
	}
}

// matcher parses name=value or name!=value; the value is a word, a
// number or a quoted string. RULE is a block word, but "rule=" is the
// matcher of a rule name.
func (p *parser) matcher() (Matcher, Pos, bool) {
	t, op := p.peek(), p.peekAt(1)
	isOp := p.atMatcherOp(1)
	if t.kind != tIdent || !isOp && (p.atKey() || isBlockWord(t)) {
		p.fail(t, "a matcher such as severity=critical", "")
		return Matcher{}, t.pos, false
	}
	p.next()
	if !isOp {
		p.fail(op, "= or != after "+t.text, "")
		return Matcher{}, t.pos, false
	}
	p.next()
	v := p.peek()
	if v.kind != tIdent && v.kind != tString && v.kind != tNumber || p.atKey() || isBlockWord(v) {
		p.fail(v, "a value: a word or a quoted string", "")
		return Matcher{}, t.pos, false
	}
	p.next()
	return Matcher{Name: t.text, Value: v.text, Not: op.kind == tCmp}, t.pos, true
}

// parseMatcherAt parses a matcher alone, as the JSON form writes it.
func parseMatcherAt(s string, at Pos, e *errs) (Matcher, bool) {
	p := newParser(s, at, e)
	m, _, ok := p.matcher()
	if t := p.peek(); ok && t.kind != tEOF {
		p.fail(t, "the end of the matcher", "")
		return Matcher{}, false
	}
	return m, ok
}

// ParseExpr parses a THRESHOLD expression on its own, as the API and the
// CLI take it.
func ParseExpr(s string) (*Expr, error) {
	e := &errs{}
	x := parseExprAt(s, Pos{Line: 1, Col: 1}, e)
	if err := e.err(); err != nil {
		return nil, err
	}
	return x, nil
}

func parseExprAt(s string, at Pos, e *errs) *Expr {
	p := newParser(s, at, e)
	x := p.expr()
	if t := p.peek(); x != nil && t.kind != tEOF {
		p.fail(t, "and, or, or the end of the expression", "")
		return nil
	}
	return x
}

func (p *parser) expr() *Expr {
	if n := p.or(); n != nil {
		return compile(n)
	}
	return nil
}

func (p *parser) or() *node  { return p.binary(nOr, "or", p.and) }
func (p *parser) and() *node { return p.binary(nAnd, "and", p.not) }

// binary parses x { word x }, left-associative.
func (p *parser) binary(op nodeOp, word string, operand func() *node) *node {
	x := operand()
	for x != nil && isWord(p.peek(), word) {
		p.next()
		y := operand()
		if y == nil {
			return nil
		}
		x = &node{op: op, x: x, y: y}
	}
	return x
}

// not parses not x, ( x ), or a comparison.
func (p *parser) not() *node {
	t := p.peek()
	if !isWord(t, "not") && t.kind != tLParen {
		return p.comparison()
	}
	if p.depth >= maxDepth {
		p.errs.add(&Error{Pos: t.pos, Msg: "expression nested too deeply", Expected: fmt.Sprintf("at most %d levels of parentheses and not", maxDepth)})
		return nil
	}
	p.next()
	p.depth++
	defer func() { p.depth-- }()
	if t.kind == tLParen {
		x := p.or()
		if x == nil {
			return nil
		}
		if _, ok := p.expect(tRParen, `")"`); !ok {
			return nil
		}
		return x
	}
	if x := p.not(); x != nil {
		return &node{op: nNot, x: x}
	}
	return nil
}

type operand struct {
	num    bool
	lit    string
	metric Metric
	pct    bool
	pos    Pos
}

func (o operand) name() string {
	if o.pct {
		return "pct_change(" + o.metric.String() + ")"
	}
	return o.metric.String()
}

// comparison parses a metric and a number around an operator, either way
// round, and converts the number into the metric's unit.
func (p *parser) comparison() *node {
	l, ok := p.operand()
	if !ok {
		return nil
	}
	opTok := p.peek()
	if opTok.kind != tCmp {
		p.fail(opTok, "a comparison: > >= < <= == !=", "compare a metric with a number, as in failed_rate > 5%")
		return nil
	}
	p.next()
	r, ok := p.operand()
	switch {
	case !ok:
		return nil
	case l.num && r.num:
		p.errs.add(&Error{Pos: l.pos, Msg: "comparison of two numbers", Expected: "a metric on one side"})
		return nil
	case !l.num && !r.num:
		p.errs.add(&Error{Pos: r.pos, Msg: "comparison of two metrics", Expected: "a number on one side", Hint: "compare each metric with a number and join them with and/or"})
		return nil
	}
	c := comparison{op: cmpOp(slices.Index(cmpNames[:], opTok.text))}
	m, n := l, r
	if l.num {
		m, n, c.numLeft = r, l, true
	}
	class := m.metric.class()
	if m.pct {
		class = classFraction
	}
	v, e := literalValue(n.lit, class, m.name())
	if e != nil {
		e.Pos = n.pos
		p.errs.add(e)
		return nil
	}
	c.metric, c.pct, c.lit, c.num = m.metric, m.pct, n.lit, v
	return &node{op: nCmp, cmp: c}
}

// operand parses a number, a metric, or pct_change(metric).
func (p *parser) operand() (operand, bool) {
	t := p.peek()
	switch {
	case t.kind == tNumber:
		p.next()
		return operand{num: true, lit: t.text, pos: t.pos}, true
	case t.kind != tIdent || p.atKey() || isBlockWord(t):
		p.fail(t, "a metric or a number", "")
		return operand{}, false
	case !isWord(t, "pct_change"):
		m, ok := p.metric()
		return operand{metric: m, pos: t.pos}, ok
	}
	p.next()
	if _, ok := p.expect(tLParen, `"(" after pct_change`); !ok {
		return operand{}, false
	}
	m, ok := p.metric()
	if !ok {
		return operand{}, false
	}
	_, ok = p.expect(tRParen, `")"`)
	return operand{metric: m, pct: true, pos: t.pos}, ok
}

func (p *parser) metric() (Metric, bool) {
	t := p.peek()
	if t.kind != tIdent {
		p.fail(t, "a metric", "")
		return 0, false
	}
	m, ok := ParseMetric(t.text)
	if !ok {
		hint := suggest(t.text, metricNames[:]...)
		if hint == "" {
			hint = "metrics are " + strings.Join(metricNames[:], ", ")
		}
		p.errs.add(&Error{Pos: t.pos, Msg: fmt.Sprintf("unknown metric %s", clip(t.text)), Expected: "a metric", Hint: hint})
		return 0, false
	}
	p.next()
	return m, true
}
