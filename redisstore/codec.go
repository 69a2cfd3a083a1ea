package redisstore

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/apollo-11/apollo/metrics"
)

// A block field holds the buckets (or rollups) of one block, each as
// "<slot>:<values>", joined by ';' in slot order; a slot is the entry's
// place in the block (0 to blockSlots-1) and an entry whose values are all
// zero is left out. The values are the entry's own totals in this order,
// as decimal integers separated by commas, trailing zeros left out. Text,
// so redis-cli shows it; a few bytes per entry, as most counters are small.
//
//	b1893553200 = "0:3,3,0,0,3,0,0,4500,3,1500,1500;7:1,0,1,0,0,0,0,0,0,0,0,0,-1"
//
// DueAgain came last, in a later release: a field written before it has
// at most 13 values and reads with DueAgain zero. A release before it
// refuses an entry that has one (a missed run that started), so a bus of
// this release needs apollo alert of this release too.
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
	vDueAgain
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
		vBacklog: s.Backlog, vRunning: s.Running, vDueAgain: s.DueAgain,
	}
}

// add folds o into v: sums, and the cost range over the sides that have
// one (the same rule as apollo.Summary.Add).
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

var errValue = errors.New("not a list of at most 14 decimal integers")

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

// blockSlots is how many entries a block holds: a block of buckets spans
// 10 minutes, a block of rollups an hour.
const blockSlots = 60

// appendBlock appends the entries es, all in the block starting at start
// whose entries are width apart, oldest first.
func appendBlock(b []byte, start, width int64, es []metrics.Entry) []byte {
	first := true
	var v vals
	for i := range es {
		v.fromEntry(&es[i])
		if v == (vals{}) {
			continue
		}
		if !first {
			b = append(b, ';')
		}
		first = false
		b = strconv.AppendInt(b, (es[i].Start-start)/width, 10)
		b = append(b, ':')
		b = appendVals(b, &v, nVals)
	}
	return b
}

var errBlock = errors.New("not a list of slot:values entries in slot order")

// slotVals is one decoded entry of a block.
type slotVals struct {
	slot int
	v    vals
}

// parseBlock decodes a block field into dst (reused) and returns it: the
// entries in slot order. A damaged field gives an error and no entries.
func parseBlock(s string, dst []slotVals) ([]slotVals, error) {
	dst = dst[:0]
	last := -1
	for rest := s; rest != ""; {
		entry := rest
		if i := strings.IndexByte(rest, ';'); i >= 0 {
			entry, rest = rest[:i], rest[i+1:]
			if rest == "" {
				return dst[:0], fmt.Errorf("%q: %w", clip(s), errBlock)
			}
		} else {
			rest = ""
		}
		slotText, values, ok := strings.Cut(entry, ":")
		slot, err := strconv.Atoi(slotText)
		if !ok || err != nil || slot <= last || slot >= blockSlots || slotText[0] == '+' || slotText[0] == '-' {
			return dst[:0], fmt.Errorf("%q: %w", clip(s), errBlock)
		}
		last = slot
		dst = append(dst, slotVals{slot: slot})
		if err := parseVals(values, &dst[len(dst)-1].v, nVals); err != nil {
			return dst[:0], err
		}
	}
	return dst, nil
}
