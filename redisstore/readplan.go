package redisstore

import (
	"fmt"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
)

// readPlan is which fields of every job one read needs. Bounds resolve to
// a level and a key (metrics.Span.At); the counters between two bounds are
// the entries between their keys, and the gauges at a bound are the levels
// now less the moves at or after its key. So a read needs, per level, the
// keys from its oldest bound up to the newest bucket a writer may have
// written (the blocks holding them), and the gauge field: the same fields
// for every job.
type readPlan struct {
	sp       metrics.Span
	lo0, lo1 int64 // first key of each level
	n0, n1   int   // keys of each level: lo, lo+width, ...
	writers  []string
	fields   []string // HMGET's fields: per writer the blocks and the gauges
	kinds    []byte   // of each field
	starts   []int64  // of each field's block
}

func newReadPlan(sp metrics.Span, bounds []int64, maxNow time.Time, writers []string) readPlan {
	if len(writers) == 0 {
		writers = []string{""}
	}
	// Writers accept changes up to MaxSkew ahead of their clocks.
	top := maxNow.UnixMilli() + metrics.MaxSkew.Milliseconds() + readMargin.Milliseconds()
	p := readPlan{sp: sp, writers: writers}
	lvFirst, kFirst := sp.At(bounds[0])
	lvLast, _ := sp.At(bounds[len(bounds)-1])
	if lvLast == 0 {
		lo := sp.Split // an interval starting in the rollups goes on from here
		if lvFirst == 0 {
			lo = kFirst
		}
		p.lo0, p.n0 = lo, int((floorTo(top, bucketMs)-lo)/bucketMs)+1
	}
	if lvFirst == 1 {
		hi := sp.Split - minuteMs // the buckets take over at Split
		if lvLast == 1 {
			hi = floorTo(top, minuteMs) // the gauges need every later rollup
		}
		p.lo1, p.n1 = kFirst, int((hi-kFirst)/minuteMs)+1
	}
	for _, w := range writers {
		p.addBlocks(kindBucket, p.lo0, p.n0, w)
		p.addBlocks(kindRollup, p.lo1, p.n1, w)
		p.add(kindGauge, 0, w)
	}
	return p
}

// addBlocks adds the fields of the blocks holding n keys from lo.
func (p *readPlan) addBlocks(kind byte, lo int64, n int, writer string) {
	if n == 0 {
		return
	}
	last := lo + int64(n-1)*width(kind)
	for b := blockOf(kind, lo); b <= last; b += span(kind) {
		p.add(kind, b, writer)
	}
}

func (p *readPlan) add(kind byte, start int64, writer string) {
	p.fields = append(p.fields, fieldName(kind, start, writer))
	p.kinds = append(p.kinds, kind)
	p.starts = append(p.starts, start)
}

func floorTo(t, step int64) int64 {
	r := t % step
	if r < 0 {
		r += step
	}
	return t - r
}

// jobData is one job's fields of a plan, every writer's summed.
type jobData struct {
	scratch []slotVals
	lv      [2][]vals     // per level, per key
	suf     [2][][2]int64 // per level: suf[i] is the gauge moves at keys i and after
	g       vals          // the gauge levels now
}

func (p *readPlan) newJobData() *jobData {
	d := &jobData{}
	for l, n := range [2]int{p.n0, p.n1} {
		d.lv[l] = make([]vals, n)
		d.suf[l] = make([][2]int64, n+1)
	}
	return d
}

// load decodes one job's HMGET reply into d.
func (d *jobData) load(p *readPlan, reply []any) error {
	if len(reply) != len(p.fields) {
		return fmt.Errorf("%d values for %d fields", len(reply), len(p.fields))
	}
	clear(d.lv[0])
	clear(d.lv[1])
	d.g = vals{}
	for i, x := range reply {
		if x == nil {
			continue
		}
		s, ok := x.(string)
		if !ok {
			return fmt.Errorf("field %s: a %T, not a string", p.fields[i], x)
		}
		var err error
		switch kind := p.kinds[i]; kind {
		case kindGauge:
			var v vals
			if err = parseVals(s, &v, nGauge); err == nil {
				d.g.add(&v)
			}
		default:
			l, lo, n := 0, p.lo0, p.n0
			if kind == kindRollup {
				l, lo, n = 1, p.lo1, p.n1
			}
			w := width(kind)
			d.scratch, err = parseBlock(s, d.scratch)
			for k := range d.scratch {
				e := &d.scratch[k]
				key := p.starts[i] + int64(e.slot)*w
				if j := (key - lo) / w; key >= lo && j < int64(n) {
					d.lv[l][j].add(&e.v)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("field %s: %w", p.fields[i], err)
		}
	}
	for l := range d.lv {
		s := d.suf[l]
		for i := len(d.lv[l]) - 1; i >= 0; i-- {
			s[i] = [2]int64{s[i+1][0] + d.lv[l][i][vBacklog], s[i+1][1] + d.lv[l][i][vRunning]}
		}
	}
	return nil
}

// index is the slot of key in level l, clamped to the fetched keys.
func (p *readPlan) index(l int, key int64) int {
	lo, n, w := p.lo0, p.n0, bucketMs
	if l == 1 {
		lo, n, w = p.lo1, p.n1, minuteMs
	}
	return min(max(int((key-lo)/w), 0), n)
}

// summarize sets out to the job over [a, b) as the Aggregator resolves it.
func (d *jobData) summarize(p *readPlan, a, b int64, out *apollo.Summary) {
	ls, ks := p.sp.At(a)
	le, ke := p.sp.At(b)
	var acc vals
	if ls == le {
		d.sum(p, ls, ks, ke, &acc)
	} else { // from the rollups into the buckets
		d.sum(p, 1, ks, p.sp.Split, &acc)
		d.sum(p, 0, p.sp.Split, ke, &acc)
	}
	if acc[vCostN] <= 0 {
		acc[vCostMin], acc[vCostMax] = 0, 0
	}
	after := d.suf[le][p.index(le, ke)]
	if le == 1 && p.n0 > 0 {
		// The rollups were read up to Split, the buckets on from there.
		b := d.suf[0][p.index(0, p.sp.Split)]
		after[0], after[1] = after[0]+b[0], after[1]+b[1]
	}
	*out = apollo.Summary{
		Count: acc[vCount], Success: acc[vSuccess], Failed: acc[vFailed], Timeout: acc[vTimeout],
		Started: acc[vStarted], Late: acc[vLate], Missed: acc[vMissed], DueAgain: acc[vDueAgain],
		CostSum: acc[vCostSum], CostN: acc[vCostN], CostMin: acc[vCostMin], CostMax: acc[vCostMax],
		// A level is never below zero, as in metrics: clocks that disagree
		// can put a task's leaving pending before its entering.
		Backlog: max(d.g[0]-after[0], 0), Running: max(d.g[1]-after[1], 0),
	}
}

// sum folds level l's entries with keys in [from, to) into acc.
func (d *jobData) sum(p *readPlan, l int, from, to int64, acc *vals) {
	for i, j := p.index(l, from), p.index(l, to); i < j; i++ {
		acc.add(&d.lv[l][i])
	}
}
