package redisstore

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/apollo-11/apollo/metrics"
)

// The value of a bucket or rollup field: its own totals in this order, as
// decimal integers separated by commas, trailing zeros left out (a bucket
// whose changes were all taken back again is ""). Text, so redis-cli shows
// it; a few bytes per field, since most of a bucket's counters are small.
const (
	vCount = iota
	vSuccess
	vFailed
	vTimeout
	vStarted
	vLate
	vMissed
	vCostSum
	vCostN
	vCostMin
	vCostMax
	vBacklog // gauge moves in the bucket
	vRunning
	nVals
)

// The gauge field holds two values: the backlog and running levels.
const nGauge = 2

// vals is one decoded field.
type vals [nVals]int64

func (v *vals) fromEntry(e *metrics.Entry) {
	s := &e.Summary
	*v = vals{
		vCount: s.Count, vSuccess: s.Success, vFailed: s.Failed, vTimeout: s.Timeout,
		vStarted: s.Started, vLate: s.Late, vMissed: s.Missed,
		vCostSum: s.CostSum, vCostN: s.CostN, vCostMin: s.CostMin, vCostMax: s.CostMax,
		vBacklog: s.Backlog, vRunning: s.Running,
	}
}

// add folds o into v: sums, and the cost range over the sides that have
// one (the same rule as metrics.Summary.Add).
func (v *vals) add(o *vals) {
	lo, hi := v[vCostMin], v[vCostMax]
	switch {
	case o[vCostMax] <= 0:
	case hi <= 0:
		lo, hi = o[vCostMin], o[vCostMax]
	default:
		lo, hi = min(lo, o[vCostMin]), max(hi, o[vCostMax])
	}
	for i := range v {
		v[i] += o[i]
	}
	v[vCostMin], v[vCostMax] = lo, hi
}

// appendVals appends the first n values of v in the field format.
func appendVals(b []byte, v *vals, n int) []byte {
	for n > 0 && v[n-1] == 0 {
		n--
	}
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v[i], 10)
	}
	return b
}

var errValue = errors.New("not a list of at most 13 decimal integers")

// parseVals decodes a field's value into v (zeroing the rest) and accepts
// at most n values. It takes nothing but what appendVals writes, give or
// take leading zeros, so a stray value in the hash is reported, not
// half-read.
func parseVals(s string, v *vals, n int) error {
	*v = vals{}
	if s == "" {
		return nil
	}
	i := 0
	for k := 0; ; k++ {
		if k == n {
			return fmt.Errorf("%q: %w", clip(s), errValue)
		}
		neg := i < len(s) && s[i] == '-'
		if neg {
			i++
		}
		start := i
		var x uint64
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			d := uint64(s[i] - '0')
			if x > (math.MaxInt64-d)/10 {
				return fmt.Errorf("%q: number out of range: %w", clip(s), errValue)
			}
			x = x*10 + d
		}
		if i == start {
			return fmt.Errorf("%q: %w", clip(s), errValue)
		}
		v[k] = int64(x)
		if neg {
			v[k] = -v[k]
		}
		if i == len(s) {
			return nil
		}
		if s[i] != ',' {
			return fmt.Errorf("%q: %w", clip(s), errValue)
		}
		i++
	}
}

// clip shortens a value for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
