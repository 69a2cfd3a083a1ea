package redisstore

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

func TestValsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		v    vals
		text string
	}{
		{"zero", vals{}, ""},
		{"one finish", vals{vCount: 1, vSuccess: 1, vStarted: 1, vCostSum: 1500, vCostN: 1, vCostMin: 1500, vCostMax: 1500}, "1,1,0,0,1,0,0,1500,1,1500,1500"},
		{"gauge moves only", vals{vBacklog: -1, vRunning: 1}, "0,0,0,0,0,0,0,0,0,0,0,-1,1"},
		{"missed run that started", vals{vStarted: 1, vLate: 1, vMissed: 1, vDueAgain: 1}, "0,0,0,0,1,1,1,0,0,0,0,0,0,1"},
		{"extremes", vals{vCount: math.MaxInt64, vCostSum: -math.MaxInt64}, "9223372036854775807,0,0,0,0,0,0,-9223372036854775807"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(appendVals(nil, &tc.v, nVals))
			if got != tc.text {
				t.Fatalf("encoded %q, want %q", got, tc.text)
			}
			var back vals
			if err := parseVals(got, &back, nVals); err != nil || back != tc.v {
				t.Fatalf("decoded %v, %v; want %v", back, err, tc.v)
			}
		})
	}
}

// A block written by the release before DueAgain (13 values at most)
// reads with DueAgain zero: Redis written by it keeps working.
func TestParseBlockBeforeDueAgain(t *testing.T) {
	t.Parallel()
	got, err := parseBlock("0:3,3,0,0,3,1,1,4500,3,1500,1500;7:1,0,1,0,0,0,0,0,0,0,0,0,-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []slotVals{
		{0, vals{vCount: 3, vSuccess: 3, vStarted: 3, vLate: 1, vMissed: 1, vCostSum: 4500, vCostN: 3, vCostMin: 1500, vCostMax: 1500}},
		{7, vals{vCount: 1, vFailed: 1, vRunning: -1}},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("parsed %v, want %v", got, want)
	}
}

func TestParseValsRejects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{",", "1,", ",1", "1,,2", "a", "1 ", " 1", "-", "+1", "1.5", "9223372036854775808",
		"99999999999999999999", strings.Repeat("1,", 14) + "1", "1\x00"} {
		var v vals
		if err := parseVals(in, &v, nVals); err == nil {
			t.Errorf("parseVals(%q) = %v, want an error", in, v)
		}
	}
	var v vals
	if err := parseVals("1,2,3", &v, nGauge); err == nil {
		t.Errorf("a gauge of three values was accepted: %v", v)
	}
}

// Whatever a hash field holds, parsing it either fails or gives values
// that encode back to an equivalent text.
func FuzzParseVals(f *testing.F) {
	for _, s := range []string{"", "1", "0,0,1", "1,1,0,0,1,0,0,1500,1,1500,1500", "-5,7", "007", "1,-0", ",", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v vals
		if err := parseVals(s, &v, nVals); err != nil {
			return
		}
		enc := appendVals(nil, &v, nVals)
		var again vals
		if err := parseVals(string(enc), &again, nVals); err != nil || again != v {
			t.Fatalf("%q parsed to %v, encoded as %q, parsed back to %v (%v)", s, v, enc, again, err)
		}
	})
}

func TestValsAddCostRange(t *testing.T) {
	t.Parallel()
	a := vals{vCount: 1, vCostN: 1, vCostSum: 5, vCostMin: 5, vCostMax: 5}
	none := vals{vCount: 2}
	b := vals{vCount: 1, vCostN: 1, vCostSum: 9, vCostMin: 9, vCostMax: 9}
	var acc vals
	for _, x := range []*vals{&none, &a, &none, &b} {
		acc.add(x)
	}
	if acc[vCount] != 6 || acc[vCostMin] != 5 || acc[vCostMax] != 9 || acc[vCostSum] != 14 {
		t.Fatalf("sum %v: want count 6, cost 5..9, sum 14", acc)
	}
}

func TestBlockRoundTrip(t *testing.T) {
	t.Parallel()
	const start = 1893553200000
	es := []metrics.Entry{
		{Start: start, Summary: apollo.Summary{Count: 3, Success: 3, Started: 3, CostSum: 4500, CostN: 3, CostMin: 1500, CostMax: 1500}},
		{Start: start + 30_000}, // all zero: left out
		{Start: start + 70_000, Summary: apollo.Summary{Failed: 1, Count: 1, Running: -1}},
		{Start: start + 590_000, Summary: apollo.Summary{Backlog: 1}},
	}
	text := string(appendBlock(nil, start, bucketMs, es))
	if want := "0:3,3,0,0,3,0,0,4500,3,1500,1500;7:1,0,1,0,0,0,0,0,0,0,0,0,-1;59:0,0,0,0,0,0,0,0,0,0,0,1"; text != want {
		t.Fatalf("encoded %q, want %q", text, want)
	}
	got, err := parseBlock(text, nil)
	var want []slotVals
	for _, i := range []int{0, 2, 3} {
		sv := slotVals{slot: int((es[i].Start - start) / bucketMs)}
		sv.v.fromEntry(&es[i])
		want = append(want, sv)
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{";", "0:1;", "1:1;0:1", "0:1;0:1", "60:1", "-1:1", "+1:1", "x:1", "0", "0:1,a"} {
		if got, err := parseBlock(bad, nil); err == nil || len(got) != 0 {
			t.Errorf("parseBlock(%q): %v, %v; want an error and no entries", bad, got, err)
		}
	}
}

// A block field either fails as a whole or gives entries in slot order
// that encode back to an equivalent text.
func FuzzParseBlock(f *testing.F) {
	for _, s := range []string{"", "0:1", "0:3,3,0,0,3,0,0,4500,3,1500,1500;7:1,0,1;59:0,0,0,0,0,0,0,0,0,0,0,1", "1:;2:0", "00:1", "0:-1,-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseBlock(s, nil)
		if err != nil {
			if len(got) != 0 {
				t.Fatalf("%q: an error with %d entries", s, len(got))
			}
			return
		}
		const start = 600_000
		var es []metrics.Entry
		for i, sv := range got {
			if sv.slot < 0 || sv.slot >= blockSlots || i > 0 && sv.slot <= got[i-1].slot {
				t.Fatalf("%q: slot %d out of the block or out of order", s, sv.slot)
			}
			v := sv.v
			e := metrics.Entry{Start: start + int64(sv.slot)*bucketMs, Summary: apollo.Summary{
				Count: v[vCount], Success: v[vSuccess], Failed: v[vFailed], Timeout: v[vTimeout], Started: v[vStarted],
				Late: v[vLate], Missed: v[vMissed], CostSum: v[vCostSum], CostN: v[vCostN], CostMin: v[vCostMin],
				CostMax: v[vCostMax], Backlog: v[vBacklog], Running: v[vRunning]}}
			es = append(es, e)
		}
		text := appendBlock(nil, start, bucketMs, es)
		again, err := parseBlock(string(text), nil)
		if err != nil {
			t.Fatalf("%q re-encoded as %q does not parse: %v", s, text, err)
		}
		nonzero := slices.DeleteFunc(slices.Clone(got), func(sv slotVals) bool { return sv.v == vals{} })
		if !slices.Equal(again, nonzero) {
			t.Fatalf("%q -> %+v -> %q -> %+v", s, got, text, again)
		}
	})
}
