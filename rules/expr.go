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

// node is the syntax tree. It is kept for String; Eval runs the program
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
	prog    []instr
	metrics []Metric
	prev    bool
}

type opcode uint8

const (
	iCmp       opcode = iota // acc = comparison
	iJumpFalse               // and: if !acc, skip the right side
	iJumpTrue                // or: if acc, skip the right side
	iNot                     // acc = !acc
)

// instr is one step of the flat program. A single boolean accumulator is
// enough: a jump skips the right operand exactly when the left one already
// decides, and leaves the deciding value in the accumulator.
type instr struct {
	code   opcode
	cmp    cmpOp // normalised to "metric op num"
	pct    bool
	metric Metric
	to     int32 // jump target
	num    float64
}

func compile(root *node) *Expr {
	e := &Expr{root: root}
	e.emit(root)
	return e
}

func (e *Expr) emit(n *node) {
	switch n.op {
	case nCmp:
		c := n.cmp
		op := c.op
		if c.numLeft {
			op = cmpFlip[op]
		}
		e.prog = append(e.prog, instr{code: iCmp, cmp: op, pct: c.pct, metric: c.metric, num: c.num})
		if !slices.Contains(e.metrics, c.metric) {
			e.metrics = append(e.metrics, c.metric)
		}
		e.prev = e.prev || c.pct
	case nNot:
		e.emit(n.x)
		e.prog = append(e.prog, instr{code: iNot})
	case nAnd, nOr:
		e.emit(n.x)
		j := len(e.prog)
		e.prog = append(e.prog, instr{code: iJumpFalse})
		if n.op == nOr {
			e.prog[j].code = iJumpTrue
		}
		e.emit(n.y)
		e.prog[j].to = int32(len(e.prog))
	}
}

// Eval reports whether the condition holds. A comparison with an undefined
// value (NaN, or pct_change when the previous window is 0) is false,
// whatever the operator. Eval does not allocate. A nil Expr is false.
func (e *Expr) Eval(v Values) bool {
	if e == nil {
		return false
	}
	acc, prog := false, e.prog
	for pc := 0; pc < len(prog); pc++ {
		in := &prog[pc]
		switch in.code {
		case iCmp:
			acc = in.test(in.value(v))
		case iJumpFalse:
			if !acc {
				pc = int(in.to) - 1
			}
		case iJumpTrue:
			if acc {
				pc = int(in.to) - 1
			}
		case iNot:
			acc = !acc
		}
	}
	return acc
}

func (in *instr) value(v Values) float64 {
	x := v.Value(in.metric)
	if !in.pct {
		return x
	}
	p := v.Previous(in.metric)
	if p == 0 {
		return math.NaN()
	}
	return (x - p) / p
}

func (in *instr) test(x float64) bool {
	switch in.cmp {
	case opGT:
		return x > in.num
	case opGE:
		return x >= in.num
	case opLT:
		return x < in.num
	case opLE:
		return x <= in.num
	case opEQ:
		return x == in.num
	}
	return x != in.num && x == x // NaN is undefined, not "different"
}

// Observe returns the value people should see next to the alert: the
// metric side of the first comparison (for pct_change, the change as a
// fraction). An undefined or infinite value is returned as 0 so that it is
// always safe to store and to encode as JSON.
func (e *Expr) Observe(v Values) float64 {
	if e == nil || len(e.prog) == 0 {
		return 0
	}
	x := e.prog[0].value(v) // the leftmost comparison is always compiled first
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
