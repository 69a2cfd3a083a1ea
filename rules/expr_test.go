package rules

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// pool holds values around the thresholds the tests use.
var pool = []float64{0, 0.04, 0.05, 0.06, 0.5, 1, 2, 5, 6, 10, 11, 100, 101, 500, 29999, 30000, 30001, 119999, 120000, 5400000, 5400001}

func randValues(r *rand.Rand, pool []float64) mapValues {
	v := mapValues{cur: map[Metric]float64{}, prev: map[Metric]float64{}}
	for m := range NumMetrics {
		v.cur[m] = pool[r.IntN(len(pool))]
		v.prev[m] = pool[r.IntN(len(pool))]
	}
	return v
}

// TestEvalSemantics checks each operator, unit, precedence rule and word
// against a predicate written by hand in Go, over many sets of values.
func TestEvalSemantics(t *testing.T) {
	t.Parallel()
	type vals = mapValues
	c := func(v vals, m Metric) float64 { return v.cur[m] }
	pct := func(v vals, m Metric) (float64, bool) {
		p := v.prev[m]
		return (v.cur[m] - p) / p, p != 0
	}
	tests := []struct {
		expr string
		want func(v vals) bool
	}{
		{"failed_rate > 5%", func(v vals) bool { return c(v, MetricFailedRate) > 0.05 }},
		{"failed_rate > 0.05", func(v vals) bool { return c(v, MetricFailedRate) > 0.05 }},
		{"failed_rate >= 5%", func(v vals) bool { return c(v, MetricFailedRate) >= 0.05 }},
		{"timeout_rate < 5%", func(v vals) bool { return c(v, MetricTimeoutRate) < 0.05 }},
		{"success_rate <= 50%", func(v vals) bool { return c(v, MetricSuccessRate) <= 0.5 }},
		{"late_rate == 0.05", func(v vals) bool { return c(v, MetricLateRate) == 0.05 }},
		{"late_rate != 0.05", func(v vals) bool { return c(v, MetricLateRate) != 0.05 }},
		{"count == 0", func(v vals) bool { return c(v, MetricCount) == 0 }},
		{"avg_cost > 30s", func(v vals) bool { return c(v, MetricAvgCost) > 30000 }},
		{"avg_cost > 30000", func(v vals) bool { return c(v, MetricAvgCost) > 30000 }},
		{"max_cost >= 1.5h", func(v vals) bool { return c(v, MetricMaxCost) >= 5400000 }},
		{"min_cost < 2m", func(v vals) bool { return c(v, MetricMinCost) < 120000 }},
		{"min_cost <= 500ms", func(v vals) bool { return c(v, MetricMinCost) <= 500 }},
		{"5 < count", func(v vals) bool { return c(v, MetricCount) > 5 }},
		{"5 <= failed", func(v vals) bool { return c(v, MetricFailed) >= 5 }},
		{"10 > timeout", func(v vals) bool { return c(v, MetricTimeout) < 10 }},
		{"10 >= success", func(v vals) bool { return c(v, MetricSuccess) <= 10 }},
		{"100 == backlog", func(v vals) bool { return c(v, MetricBacklog) == 100 }},
		{"30s < avg_cost", func(v vals) bool { return c(v, MetricAvgCost) > 30000 }},
		{"count > 1 or failed > 1 and timeout > 1", func(v vals) bool {
			return c(v, MetricCount) > 1 || (c(v, MetricFailed) > 1 && c(v, MetricTimeout) > 1)
		}},
		{"(count > 1 or failed > 1) and timeout > 1", func(v vals) bool {
			return (c(v, MetricCount) > 1 || c(v, MetricFailed) > 1) && c(v, MetricTimeout) > 1
		}},
		{"not count > 1 and failed > 1", func(v vals) bool { return !(c(v, MetricCount) > 1) && c(v, MetricFailed) > 1 }},
		{"not (count > 1 and failed > 1)", func(v vals) bool { return !(c(v, MetricCount) > 1 && c(v, MetricFailed) > 1) }},
		{"NOT Count > 1 OR Failed > 1", func(v vals) bool { return !(c(v, MetricCount) > 1) || c(v, MetricFailed) > 1 }},
		{"not not started >= 1", func(v vals) bool { return c(v, MetricStarted) >= 1 }},
		{"started >= 1 and late >= 1 and late_rate > 10%", func(v vals) bool {
			return c(v, MetricStarted) >= 1 && c(v, MetricLate) >= 1 && c(v, MetricLateRate) > 0.1
		}},
		{"throughput < 1 and backlog > 100 or running == 0", func(v vals) bool {
			return c(v, MetricThroughput) < 1 && c(v, MetricBacklog) > 100 || c(v, MetricRunning) == 0
		}},
		{"pct_change(avg_cost) > 50%", func(v vals) bool { x, ok := pct(v, MetricAvgCost); return ok && x > 0.5 }},
		{"pct_change(throughput) <= -50%", func(v vals) bool { x, ok := pct(v, MetricThroughput); return ok && x <= -0.5 }},
		{"-0.5 >= pct_change(count)", func(v vals) bool { x, ok := pct(v, MetricCount); return ok && x <= -0.5 }},
		{"pct_change(count) > 1 and count > 10", func(v vals) bool {
			x, ok := pct(v, MetricCount)
			return ok && x > 1 && c(v, MetricCount) > 10
		}},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, tt := range tests {
		x := mustExpr(t, tt.expr)
		trues := 0
		for range 3000 {
			v := randValues(r, pool)
			got := x.Eval(v)
			if want := tt.want(v); got != want {
				t.Fatalf("%s over %v (previous %v) = %v, want %v", tt.expr, v.cur, v.prev, got, want)
			}
			if got {
				trues++
			}
		}
		if trues == 0 || trues == 3000 {
			t.Errorf("%s was %v every time: the values do not exercise it", tt.expr, trues > 0)
		}
	}
}

// TestEvalUndefined: NaN, infinities and a previous window of 0 never
// make an alert fire by accident, and never panic.
func TestEvalUndefined(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	v := func(cur, prev float64) mapValues {
		return mapValues{cur: map[Metric]float64{MetricAvgCost: cur}, prev: map[Metric]float64{MetricAvgCost: prev}}
	}
	tests := []struct {
		name, expr string
		v          mapValues
		want       bool
		observe    float64
	}{
		{"pct_change with previous 0, >", "pct_change(avg_cost) > 50%", v(100, 0), false, 0},
		{"pct_change with previous 0, <", "pct_change(avg_cost) < 50%", v(100, 0), false, 0},
		{"pct_change with previous 0, !=", "pct_change(avg_cost) != 0", v(100, 0), false, 0},
		{"pct_change with previous 0, ==", "pct_change(avg_cost) == 0", v(0, 0), false, 0},
		{"not of an undefined comparison", "not pct_change(avg_cost) > 50%", v(100, 0), true, 0},
		{"pct_change defined", "pct_change(avg_cost) > 50%", v(300, 100), true, 2},
		{"pct_change drop", "pct_change(avg_cost) < -50%", v(25, 100), true, -0.75},
		{"pct_change previous NaN", "pct_change(avg_cost) != 1", v(1, nan), false, 0},
		{"pct_change previous Inf", "pct_change(avg_cost) < 1", v(1, inf), false, 0},
		{"pct_change current Inf", "pct_change(avg_cost) > 50%", v(inf, 1), true, 0},
		{"NaN >", "avg_cost > 1", v(nan, 0), false, 0},
		{"NaN <=", "avg_cost <= 1", v(nan, 0), false, 0},
		{"NaN ==", "avg_cost == 1", v(nan, 0), false, 0},
		{"NaN !=", "avg_cost != 1", v(nan, 0), false, 0},
		{"NaN number-first", "1 != avg_cost", v(nan, 0), false, 0},
		{"+Inf >", "avg_cost > 1h", v(inf, 0), true, 0},
		{"+Inf <", "avg_cost < 1h", v(inf, 0), false, 0},
		{"-Inf <", "avg_cost < 1h", v(-inf, 0), true, 0},
		{"Observe number-first", "30s < avg_cost", v(45000, 0), true, 45000},
		{"Observe first comparison", "avg_cost > 1 and count > 1", v(7, 0), false, 7},
		{"Observe inside not and parens", "not (avg_cost > 1 or count > 1)", v(7, 0), false, 7},
	}
	for _, tt := range tests {
		x := mustExpr(t, tt.expr)
		if got := x.Eval(tt.v); got != tt.want {
			t.Errorf("%s: Eval(%s) = %v, want %v", tt.name, tt.expr, got, tt.want)
		}
		if got := x.Observe(tt.v); got != tt.observe {
			t.Errorf("%s: Observe(%s) = %v, want %v", tt.name, tt.expr, got, tt.observe)
		}
	}
	var none *Expr
	if none.Eval(v(1, 1)) || none.Observe(v(1, 1)) != 0 || none.Metrics() != nil || none.UsesPrevious() || none.String() != "" {
		t.Error("a nil Expr must be false, 0 and empty")
	}
}

// countingValues records which metrics Eval asked for.
type countingValues struct {
	mapValues
	asked, askedPrev []Metric
}

func (c *countingValues) Value(m Metric) float64 {
	c.asked = append(c.asked, m)
	return c.mapValues.Value(m)
}

func (c *countingValues) Previous(m Metric) float64 {
	c.askedPrev = append(c.askedPrev, m)
	return c.mapValues.Previous(m)
}

// TestEvalShortCircuit: and/or stop as soon as the answer is known, and
// the previous window is asked for only by pct_change.
func TestEvalShortCircuit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr      string
		count     float64
		want      bool
		asked     []Metric
		askedPrev []Metric
	}{
		{"count > 0 or failed > 0", 1, true, []Metric{MetricCount}, nil},
		{"count > 0 or failed > 0", 0, false, []Metric{MetricCount, MetricFailed}, nil},
		{"count > 0 and failed > 0", 0, false, []Metric{MetricCount}, nil},
		{"count > 0 and failed > 0 and timeout > 0", 0, false, []Metric{MetricCount}, nil},
		{"not count > 0 and pct_change(avg_cost) > 1", 0, false, []Metric{MetricCount, MetricAvgCost}, []Metric{MetricAvgCost}},
		{"(count > 0 or failed > 0) and timeout > 0", 1, false, []Metric{MetricCount, MetricTimeout}, nil},
	}
	for _, tt := range tests {
		v := &countingValues{mapValues: mapValues{cur: map[Metric]float64{MetricCount: tt.count}}}
		if got := mustExpr(t, tt.expr).Eval(v); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.expr, got, tt.want)
		}
		if !slices.Equal(v.asked, tt.asked) || !slices.Equal(v.askedPrev, tt.askedPrev) {
			t.Errorf("%s asked for %v and previous %v, want %v and %v", tt.expr, v.asked, v.askedPrev, tt.asked, tt.askedPrev)
		}
	}
}

func TestExprMetrics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr    string
		metrics []Metric
		prev    bool
	}{
		{"failed_rate > 1% and count > 10 or failed_rate > 50%", []Metric{MetricFailedRate, MetricCount}, false},
		{"count > 1 and pct_change(avg_cost) > 1", []Metric{MetricCount, MetricAvgCost}, true},
		{"5 < backlog", []Metric{MetricBacklog}, false},
	}
	for _, tt := range tests {
		x := mustExpr(t, tt.expr)
		if got := x.Metrics(); !slices.Equal(got, tt.metrics) {
			t.Errorf("%s: Metrics = %v, want %v", tt.expr, got, tt.metrics)
		}
		if x.UsesPrevious() != tt.prev {
			t.Errorf("%s: UsesPrevious = %v, want %v", tt.expr, x.UsesPrevious(), tt.prev)
		}
		x.Metrics()[0] = MetricThroughput // the caller's copy
		if x.Metrics()[0] != tt.metrics[0] {
			t.Errorf("%s: Metrics shares its slice", tt.expr)
		}
	}
}

func TestExprString(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"FAILED_RATE>5%", "failed_rate > 5%"},
		{"Pct_Change( Avg_Cost )>=50%", "pct_change(avg_cost) >= 50%"},
		{"count > 1 or (failed > 1 or timeout > 1)", "count > 1 or (failed > 1 or timeout > 1)"},
		{"(count > 1 or failed > 1) or timeout > 1", "count > 1 or failed > 1 or timeout > 1"},
		{"count > 1 and (failed > 1 or timeout > 1)", "count > 1 and (failed > 1 or timeout > 1)"},
		{"(count > 1 and failed > 1) or timeout > 1", "count > 1 and failed > 1 or timeout > 1"},
		{"NOT (count > 1 AND failed > 1)", "not (count > 1 and failed > 1)"},
		{"not (count > 1)", "not count > 1"},
		{"((count > 1))", "count > 1"},
		{"5 < count", "5 < count"},
		{"avg_cost>1.50h", "avg_cost > 1.50h"},
	}
	for _, tt := range tests {
		x := mustExpr(t, tt.in)
		if got := x.String(); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if y := mustExpr(t, x.String()); !reflect.DeepEqual(x.checks, y.checks) {
			t.Errorf("%q re-parses to different comparisons", tt.in)
		}
	}
}

func TestParseExprErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", "1:1: unexpected end of input (expected a metric or a number)"},
		{"count >", "1:8: unexpected end of input (expected a metric or a number)"},
		{"count > 1 DURATION: 2m", `1:11: unexpected "DURATION" (expected and, or, or the end of the expression)`},
		{"count > 1\n and fail_rate > 1", `2:6: unknown metric "fail_rate" (expected a metric); did you mean failed_rate?`},
		{"pct_change avg_cost > 1", `1:12: unexpected "avg_cost" (expected "(" after pct_change)`},
		{"count > 99999999999999999999999999999999999999999" + strings.Repeat("9", 300), "1:9: number " + "99999999999999999999999999999999999999999" + strings.Repeat("9", 300) + " is out of range"},
	}
	for _, tt := range tests {
		_, err := ParseExpr(tt.in)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseExpr(%q)\n got: %v\nwant: %s", tt.in, err, tt.want)
		}
	}
}

// randExpr writes a random valid expression, in random case, with numbers
// in units that fit their metric.
func randExpr(r *rand.Rand, depth int) string {
	word := func(w string) string {
		if r.IntN(4) == 0 {
			return strings.ToUpper(w)
		}
		return w
	}
	if depth == 0 || r.IntN(3) == 0 {
		m := Metric(r.IntN(int(NumMetrics)))
		side, class := word(m.String()), m.class()
		if r.IntN(4) == 0 {
			side, class = word("pct_change")+"("+side+")", classFraction
		}
		lits := map[unitClass][]string{
			classFraction:  {"0.05", "5%", "-20%", "0", "1", "50%"},
			classMillis:    {"30s", "1.5h", "500ms", "30000", "2m", "0"},
			classCount:     {"0", "1", "5", "10.5", "100"},
			classPerMinute: {"0", "1", "5", "10.5", "100"},
		}[class]
		lit, op := lits[r.IntN(len(lits))], cmpNames[r.IntN(len(cmpNames))]
		if r.IntN(4) == 0 {
			return lit + " " + op + " " + side
		}
		return side + " " + op + " " + lit
	}
	switch r.IntN(4) {
	case 0:
		return randExpr(r, depth-1) + " " + word("and") + " " + randExpr(r, depth-1)
	case 1:
		return randExpr(r, depth-1) + " " + word("or") + " " + randExpr(r, depth-1)
	case 2:
		return word("not") + " " + randExpr(r, depth-1)
	}
	return "(" + randExpr(r, depth-1) + ")"
}

// TestEvalMatchesTree: the compiled closures and a plain walk of the tree
// agree on random expressions and values, undefined ones included; and
// the canonical text of each expression re-parses to the same comparisons.
func TestEvalMatchesTree(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	odd := append(slices.Clone(pool), math.NaN(), math.Inf(1), math.Inf(-1), -1)
	for range 2000 {
		src := randExpr(r, 5)
		x := mustExpr(t, src)
		if y := mustExpr(t, x.String()); !reflect.DeepEqual(x.checks, y.checks) || y.String() != x.String() {
			t.Fatalf("%q: canonical %q re-parses differently", src, x.String())
		}
		for range 20 {
			v := randValues(r, odd)
			if got, want := x.Eval(v), evalTree(x.root, v); got != want {
				t.Fatalf("%s over %v / %v: compiled %v, tree %v", x, v.cur, v.prev, got, want)
			}
		}
	}
}

func TestEvalDoesNotAllocate(t *testing.T) {
	x := mustExpr(t, "pct_change(avg_cost) > 50% and count >= 10 or not (failed_rate < 5% and late_rate < 1%)")
	v := &arrayValues{}
	v.cur[MetricCount], v.cur[MetricAvgCost], v.prev[MetricAvgCost] = 20, 300, 100
	if n := testing.AllocsPerRun(1000, func() { x.Eval(v); x.Observe(v) }); n != 0 {
		t.Errorf("Eval and Observe allocate %v times per run", n)
	}
}
