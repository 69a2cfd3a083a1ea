package rules

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// BenchmarkEval compares the compiled closures with a walk of the syntax
// tree, on the seed's one comparison and on a compound condition.
func BenchmarkEval(b *testing.B) {
	v := &arrayValues{}
	v.cur[MetricFailedRate], v.cur[MetricCount], v.cur[MetricAvgCost], v.prev[MetricAvgCost] = 0.07, 20, 300, 100
	v.cur[MetricLateRate] = 0.2
	for _, c := range []struct{ name, expr string }{
		{"seed", "failed_rate > 0.05"},
		{"compound", "pct_change(avg_cost) > 50% and count >= 10 or not (failed_rate < 5% and late_rate < 1%)"},
	} {
		x := mustExpr(b, c.expr)
		b.Run(c.name+"/compiled", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				x.Eval(v)
			}
		})
		b.Run(c.name+"/tree", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				evalTree(x.root, v)
			}
		})
	}
}

// BenchmarkParse parses a file of 1000 varied rules in each form.
func BenchmarkParse(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	rules := make([]*Rule, 1000)
	var text strings.Builder
	for i := range rules {
		rules[i] = randRule(r, i)
		fmt.Fprintf(&text, "%s\n", rules[i])
	}
	js, err := json.Marshal(map[string]any{"rules": rules})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		src  []byte
	}{{"text", []byte(text.String())}, {"json", js}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.src)))
			for b.Loop() {
				if rs, err := Parse("bench", c.src); err != nil || len(rs) != 1000 {
					b.Fatalf("%d rules, %v", len(rs), err)
				}
			}
		})
	}
}
