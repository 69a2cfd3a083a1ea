package rulebook

import (
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/rules"
)

// bigRulesFile is a rules file of n rate rules, about 80 bytes each.
func bigRulesFile(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "RULE r%05d task_prefix: \"job_%05d_\" WINDOW: 5m THRESHOLD: failed_rate > 5%% NOTIFY: ops\n", i, i)
	}
	return []byte(b.String())
}

// BenchmarkPutRules is one PUT /api/v1/rules of a file of MaxRules rules
// (0.8 MB; it was 40 000 rules, 3.3 MB, before the bound), the answer
// included: its bytes per operation are what one tenant admin's PUT
// costs the server.
func BenchmarkPutRules(b *testing.B) {
	src := bigRulesFile(MaxRules)
	eng := &memEngine{srcs: map[string][]byte{}, rs: map[string][]*rules.Rule{}}
	book := Book{Engine: eng, Known: func(_, name string) bool { return name == "ops" }}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, problems, err := book.PutRules(b.Context(), "acme", src, ""); err != nil || problems != nil {
			b.Fatal(err, problems)
		}
	}
}

// A PUT allocates a bounded multiple of its body. Before, it was about
// 200× (a strings.Replacer built for every quoted string, and the file
// parsed again for the answer): 650 MB for a 3.3 MB file of 40 000 rules.
func TestPutRulesAllocatesLittleMoreThanItsRules(t *testing.T) {
	src := bigRulesFile(2_000)
	eng := &memEngine{srcs: map[string][]byte{}, rs: map[string][]*rules.Rule{}}
	book := Book{Engine: eng, Known: func(_, name string) bool { return name == "ops" }}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, problems, err := book.PutRules(t.Context(), "acme", src, ""); err != nil || problems != nil {
		t.Fatal(err, problems)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 60*uint64(len(src)) {
		t.Errorf("a PUT of %d bytes allocated %d bytes (%d×), want at most 60×", len(src), n, n/uint64(len(src)))
	}
}

type discardSender struct{}

func (discardSender) Send(apollo.Notification) {}

// BenchmarkPutRulesEngine is BenchmarkPutRules into the alert engine, as
// the all-in-one server's API puts rules in force.
func BenchmarkPutRulesEngine(b *testing.B) {
	src := bigRulesFile(MaxRules)
	log := slog.New(slog.DiscardHandler)
	agg, err := metrics.New(metrics.Options{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	eng, err := alert.New(alert.Options{Store: agg, Sender: discardSender{}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	book := Book{Engine: eng, Known: func(_, name string) bool { return name == "ops" }}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, problems, err := book.PutRules(b.Context(), "acme", src, ""); err != nil || problems != nil {
			b.Fatal(err, problems)
		}
	}
}
