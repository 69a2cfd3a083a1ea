package rules

import (
	"math"
	"slices"
	"strings"
)

// Values is what an Expr reads: one window of one group (a prefix, or one
// job name with BY: name).
type Values interface {
	// Value is the metric over the current window.
	Value(m Metric) float64
	// Previous is the metric over the window of the same length just before
	// the current one. It is asked for only when the Expr uses pct_change.
	Previous(m Metric) float64
}

type nodeOp uint8

// In order of precedence, loosest last: or < and < not < comparison.
const (
	nCmp nodeOp = iota
	nNot
	nAnd
	nOr
)

var nodePrec = [...]int{nCmp: 4, nNot: 3, nAnd: 2, nOr: 1}

type cmpOp uint8

const (
	opGT cmpOp = iota
	opGE
	opLT
	opLE
	opEQ
	opNE
)

var (
	cmpNames = [...]string{">", ">=", "<", "<=", "==", "!="}
	// cmpFlip turns "5 < count" into "count > 5".
	cmpFlip = [...]cmpOp{opLT, opLE, opGT, opGE, opEQ, opNE}
)

// node is the syntax tree. It is kept for String; Eval runs the closures
// compiled from it.
type node struct {
	op   nodeOp
	x, y *node // not uses x; and, or use both
	cmp  comparison
}

type comparison struct {
	op      cmpOp // as written
	metric  Metric
	pct     bool    // pct_change(metric)
	lit     string  // the number as written (5%, 30s), so String reads like the source
	num     float64 // the number in the metric's unit
	numLeft bool    // written "number op metric"
}

// Expr is a compiled THRESHOLD expression. It is immutable and safe for
// concurrent use.
type Expr struct {
	root    *node
	eval    func(Values) bool
	checks  []check // the comparisons, normalised, in source order
	metrics []Metric
	prev    bool
}

// check is one comparison, normalised to "metric op num".
type check struct {
	metric Metric
	pct    bool
	op     cmpOp
	num    float64
}

// compile turns the tree into nested closures, one per node. Measured
// against a walk of the tree and against a flat instruction loop, closures
// were the fastest (see BenchmarkEval and docs/rules.md), mostly because
// the common comparisons become one call with no switch.
func compile(root *node) *Expr {
	e := &Expr{root: root}
	e.eval = e.compile(root)
	return e
}

func (e *Expr) compile(n *node) func(Values) bool {
	switch n.op {
	case nNot:
		x := e.compile(n.x)
		return func(v Values) bool { return !x(v) }
	case nAnd:
		x, y := e.compile(n.x), e.compile(n.y)
		return func(v Values) bool { return x(v) && y(v) }
	case nOr:
		x, y := e.compile(n.x), e.compile(n.y)
		return func(v Values) bool { return x(v) || y(v) }
	}
	c := check{metric: n.cmp.metric, pct: n.cmp.pct, op: n.cmp.op, num: n.cmp.num}
	if n.cmp.numLeft {
		c.op = cmpFlip[c.op]
	}
	e.checks = append(e.checks, c)
	if !slices.Contains(e.metrics, c.metric) {
		e.metrics = append(e.metrics, c.metric)
	}
	e.prev = e.prev || c.pct
	m, k := c.metric, c.num
	switch {
	case c.pct:
		return func(v Values) bool { return c.test(c.value(v)) }
	case c.op == opGT:
		return func(v Values) bool { return v.Value(m) > k }
	case c.op == opGE:
		return func(v Values) bool { return v.Value(m) >= k }
	case c.op == opLT:
		return func(v Values) bool { return v.Value(m) < k }
	case c.op == opLE:
		return func(v Values) bool { return v.Value(m) <= k }
	case c.op == opEQ:
		return func(v Values) bool { return v.Value(m) == k }
	}
	return func(v Values) bool { x := v.Value(m); return x != k && x == x }
}

// Eval reports whether the condition holds. A comparison with an undefined
// value (NaN, or pct_change when the previous window is 0) is false,
// whatever the operator. Eval does not allocate. A nil Expr is false.
func (e *Expr) Eval(v Values) bool {
	return e != nil && e.eval(v)
}

func (c *check) value(v Values) float64 {
	x := v.Value(c.metric)
	if !c.pct {
		return x
	}
	p := v.Previous(c.metric)
	if p == 0 {
		return math.NaN()
	}
	return (x - p) / p
}

func (c *check) test(x float64) bool {
	switch c.op {
	case opGT:
		return x > c.num
	case opGE:
		return x >= c.num
	case opLT:
		return x < c.num
	case opLE:
		return x <= c.num
	case opEQ:
		return x == c.num
	}
	return x != c.num && x == x // NaN is undefined, not "different"
}

// Observe returns the value people should see next to the alert: the
// metric side of the first comparison (for pct_change, the change as a
// fraction). An undefined or infinite value is returned as 0 so that it is
// always safe to store and to encode as JSON.
func (e *Expr) Observe(v Values) float64 {
	if e == nil || len(e.checks) == 0 {
		return 0
	}
	x := e.checks[0].value(v)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// Metrics lists the metrics the engine must fetch, each once, in the order
// they first appear.
func (e *Expr) Metrics() []Metric {
	if e == nil {
		return nil
	}
	return slices.Clone(e.metrics)
}

// UsesPrevious reports whether Eval asks for the previous window.
func (e *Expr) UsesPrevious() bool { return e != nil && e.prev }

// String is the canonical text: lower-case words, numbers as written, and
// only the parentheses that precedence needs. ParseExpr(e.String()) gives
// an expression with the same String.
func (e *Expr) String() string {
	if e == nil || e.root == nil {
		return ""
	}
	var b strings.Builder
	writeNode(&b, e.root, 0)
	return b.String()
}

// writeNode writes n; need is the precedence its place demands. The right
// operand of and/or demands more than its parent, so that a or (b or c)
// keeps its parentheses and re-parses to the same tree.
func writeNode(b *strings.Builder, n *node, need int) {
	p := nodePrec[n.op]
	if p < need {
		b.WriteByte('(')
		defer b.WriteByte(')')
	}
	switch n.op {
	case nCmp:
		c := n.cmp
		side := c.metric.String()
		if c.pct {
			side = "pct_change(" + side + ")"
		}
		l, r := side, c.lit
		if c.numLeft {
			l, r = r, l
		}
		b.WriteString(l + " " + cmpNames[c.op] + " " + r)
	case nNot:
		b.WriteString("not ")
		writeNode(b, n.x, p)
	case nAnd, nOr:
		writeNode(b, n.x, p)
		if n.op == nAnd {
			b.WriteString(" and ")
		} else {
			b.WriteString(" or ")
		}
		writeNode(b, n.y, p+1)
	}
}
