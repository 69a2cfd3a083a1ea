package rules

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// mapValues is a Values backed by maps; a missing metric is 0.
type mapValues struct {
	cur, prev map[Metric]float64
}

func (v mapValues) Value(m Metric) float64    { return v.cur[m] }
func (v mapValues) Previous(m Metric) float64 { return v.prev[m] }

// arrayValues is the shape an engine would use: no map lookups, so that
// benchmarks measure Eval.
type arrayValues struct{ cur, prev [NumMetrics]float64 }

func (v *arrayValues) Value(m Metric) float64    { return v.cur[m] }
func (v *arrayValues) Previous(m Metric) float64 { return v.prev[m] }

// diffRules says how two rules differ in meaning, or "" if they are equal.
// Where a rule came from (Pos) is not part of its meaning.
func diffRules(a, b *Rule) string {
	if a.String() != b.String() {
		return fmt.Sprintf("text differs:\n  %s\n  %s", a, b)
	}
	switch {
	case a.Name != b.Name, a.Prefix != b.Prefix, a.Window != b.Window, a.Duration != b.Duration,
		a.Keep != b.Keep, a.GroupWindow != b.GroupWindow, a.Severity != b.Severity, a.By != b.By:
		return fmt.Sprintf("scalar fields differ:\n  %#v\n  %#v", a, b)
	case !slices.Equal(a.On, b.On), !slices.Equal(a.Occurrences, b.Occurrences), !slices.Equal(a.Notify, b.Notify), !maps.Equal(a.Labels, b.Labels):
		return fmt.Sprintf("lists differ: %v %v %v %v / %v %v %v %v", a.On, a.Occurrences, a.Notify, a.Labels, b.On, b.Occurrences, b.Notify, b.Labels)
	case (a.Expr == nil) != (b.Expr == nil):
		return "one rule has an expression, the other not"
	case a.Expr != nil && (a.Expr.String() != b.Expr.String() || !reflect.DeepEqual(a.Expr.checks, b.Expr.checks)):
		return fmt.Sprintf("expressions differ:\n  %s %+v\n  %s %+v", a.Expr, a.Expr.checks, b.Expr, b.Expr.checks)
	}
	return ""
}

// diffInhibits says how two inhibit rules differ, or "" if they are
// equal; Pos is not part of their meaning.
func diffInhibits(a, b *Inhibit) string {
	if a.String() != b.String() || a.Name != b.Name || !slices.Equal(a.Source, b.Source) || !slices.Equal(a.Target, b.Target) || !slices.Equal(a.Equal, b.Equal) {
		return fmt.Sprintf("inhibit rules differ:\n  %#v\n  %#v", a, b)
	}
	return ""
}

// evalTree is a second, independent reading of the semantics: it walks the
// syntax tree, swaps operands instead of flipping operators, and uses Go's
// && and ||. Tests check the compiled closures against it; benchmarks
// compare the two.
func evalTree(n *node, v Values) bool {
	switch n.op {
	case nNot:
		return !evalTree(n.x, v)
	case nAnd:
		return evalTree(n.x, v) && evalTree(n.y, v)
	case nOr:
		return evalTree(n.x, v) || evalTree(n.y, v)
	}
	c := n.cmp
	x := v.Value(c.metric)
	if c.pct {
		p := v.Previous(c.metric)
		if p == 0 {
			return false
		}
		x = (x - p) / p
	}
	if x != x {
		return false
	}
	l, r := x, c.num
	if c.numLeft {
		l, r = r, l
	}
	switch c.op {
	case opGT:
		return l > r
	case opGE:
		return l >= r
	case opLT:
		return l < r
	case opLE:
		return l <= r
	case opEQ:
		return l == r
	}
	return l != r
}
