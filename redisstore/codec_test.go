package redisstore

import (
	"math"
	"strings"
	"testing"
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

func TestParseValsRejects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{",", "1,", ",1", "1,,2", "a", "1 ", " 1", "-", "+1", "1.5", "9223372036854775808",
		"99999999999999999999", strings.Repeat("1,", 13) + "1", "1\x00"} {
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
