package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
)

// A scale-out node feeds the changes of several partitions, each with its
// own LSNs (cluster.LiveFeed): one bus mark would mean nothing. Each
// partition has a part of the feed instead, whose mark the feed saves, in
// the MULTI of the batch, in the hash <prefix>:{changes}:parts, field the
// partition's number, value "<mark> <written>": every change of the
// partition up to the mark is in the stream, and so are those of the LSNs
// in written (ranges "a-b" or single LSNs, comma-separated), which are
// above it. The partition's next owner reads them (Resume): its replay
// hands the part the changes above the mark again, and the part passes
// over the written ones. The changes themselves go on the wire without
// their LSN, as before: the alert processes' heard LSNs are of one bus.

func changePartsKey(prefix string) string { return prefix + ":{changes}:parts" }

// FeedPart is the feed of one partition of a scale-out node
// (cluster.LiveFeed). Its fields past p are the feed's flushMu's, but
// skip, which is the feed's mu's.
type FeedPart struct {
	f    *ChangeFeed
	p    int
	bus  func() uint64 // the partition bus's live watermark
	log  *slog.Logger
	name string // the hash field

	ready   bool                // Replayed was called: the mark is the part's own
	floor   uint64              // the saved mark Resume read: every change up to it is in the stream
	written map[uint64]struct{} // LSNs above the last mark saved whose changes are in the stream; nil for none
	saved   string              // the value last saved; "" for none
	skip    map[uint64]struct{} // written before Resume: the replay's changes to pass over
}

// Part returns the feed of partition p, whose bus's live watermark mark
// returns. Call Resume, then Replayed, before the partition's changes
// flow; Close when the partition is given up.
func (f *ChangeFeed) Part(p int, mark func() uint64, log *slog.Logger) *FeedPart {
	if log == nil {
		log = f.log
	}
	fp := &FeedPart{f: f, p: p, bus: mark, log: log, name: strconv.Itoa(p)}
	f.flushMu.Lock()
	f.parts = append(f.parts, fp)
	f.flushMu.Unlock()
	return fp
}

// Apply queues a change of the partition (bus.Observer), unless the
// replay hands over one that was written before.
func (fp *FeedPart) Apply(c *apollo.Change) {
	fp.f.apply(c, func(w *wireChange) bool {
		if _, ok := fp.skip[c.LSN]; ok {
			return false
		}
		w.part, w.plsn = fp, c.LSN
		return true
	})
}

// Resume reads the partition's saved mark: the replay hands the part the
// changes above it (bus.Bus.ReplayLiveAfter), math.MaxUint64 for none
// saved.
func (fp *FeedPart) Resume(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := fp.f.c.HGet(ctx, changePartsKey(fp.f.prefix), fp.name).Result()
	if errors.Is(err, redis.Nil) {
		return math.MaxUint64, nil
	}
	if err != nil {
		return math.MaxUint64, err
	}
	mark, written, err := parsePartMark(s)
	if err != nil {
		fp.log.Warn("the partition's saved change-feed mark does not read; nothing is replayed to the event rules", "value", s, "err", err)
		return math.MaxUint64, nil
	}
	fp.f.flushMu.Lock()
	fp.floor, fp.saved = mark, s
	if fp.written == nil {
		fp.written = map[uint64]struct{}{}
	}
	for _, lsn := range written {
		fp.written[lsn] = struct{}{}
	}
	fp.f.flushMu.Unlock()
	skip := make(map[uint64]struct{}, len(written))
	for _, lsn := range written {
		skip[lsn] = struct{}{}
	}
	fp.f.mu.Lock()
	fp.skip = skip
	fp.f.mu.Unlock()
	return mark, nil
}

// Replayed says the partition's replay ended at LSN end: the part's mark
// is its bus's from now on. A saved mark above end is another log's (the
// streams were made anew) and is forgotten.
func (fp *FeedPart) Replayed(end uint64) {
	fp.f.mu.Lock()
	fp.skip = nil
	fp.f.mu.Unlock()
	fp.f.flushMu.Lock()
	defer fp.f.flushMu.Unlock()
	if fp.floor > end {
		fp.log.Warn("the partition's saved change-feed mark is past the end of its log (its streams were made anew): forgotten", "mark", fp.floor, "end", end)
		fp.floor = 0
		clear(fp.written)
	}
	fp.ready = true
}

// Save writes what the feed holds and the part's mark now.
func (fp *FeedPart) Save(ctx context.Context) error { return fp.f.flush(ctx) }

// Close writes what the feed holds and the part's last mark, then
// forgets the part: its changes still queued (Redis refused them) go out
// later without moving any mark.
func (fp *FeedPart) Close(ctx context.Context) error {
	err := fp.f.flush(ctx)
	fp.f.flushMu.Lock()
	fp.f.parts = slices.DeleteFunc(fp.f.parts, func(p *FeedPart) bool { return p == fp })
	fp.f.flushMu.Unlock()
	return err
}

// partMark is a part's mark read before a batch is taken, and what is
// saved with the batch.
type partMark struct {
	fp      *FeedPart
	mark    uint64
	written map[uint64]struct{}
	value   string
}

// partMarks reads every part's mark; with flushMu held, before the batch
// is taken: every change of the part up to it is in the batch or written.
func (f *ChangeFeed) partMarks() []partMark {
	ms := make([]partMark, len(f.parts))
	for i, fp := range f.parts {
		ms[i] = partMark{fp: fp, mark: fp.floor}
		if fp.ready {
			ms[i].mark = max(fp.floor, fp.bus())
		}
	}
	return ms
}

// partSaves works out, for each part, the LSNs above its mark written
// once batch is, and the value to save when the part is ready and it
// changed; with flushMu held.
func (f *ChangeFeed) partSaves(ms []partMark, batch []wireChange) []partMark {
	for i := range ms {
		m := &ms[i]
		for lsn := range m.fp.written {
			if lsn > m.mark {
				m.note(lsn)
			}
		}
	}
	index := make(map[*FeedPart]int, len(ms))
	for i := range ms {
		index[ms[i].fp] = i
	}
	for i := range batch {
		w := &batch[i]
		if j, ok := index[w.part]; ok && w.plsn > ms[j].mark {
			ms[j].note(w.plsn)
		}
	}
	for i := range ms {
		if ms[i].fp.ready {
			ms[i].value = formatPartMark(ms[i].mark, ms[i].written)
		}
	}
	return ms
}

// note adds lsn to the LSNs written above the mark.
func (m *partMark) note(lsn uint64) {
	if m.written == nil {
		m.written = map[uint64]struct{}{}
	}
	m.written[lsn] = struct{}{}
}

// savedParts records what a MULTI that succeeded wrote; with flushMu held.
func savedParts(ms []partMark) {
	for _, m := range ms {
		m.fp.written = m.written
		if m.value != "" {
			m.fp.saved = m.value
		}
	}
}

func formatPartMark(mark uint64, written map[uint64]struct{}) string {
	lsns := make([]uint64, 0, len(written))
	for lsn := range written {
		lsns = append(lsns, lsn)
	}
	slices.Sort(lsns)
	var b strings.Builder
	b.WriteString(strconv.FormatUint(mark, 10))
	b.WriteByte(' ')
	for i := 0; i < len(lsns); {
		j := i
		for j+1 < len(lsns) && lsns[j+1] == lsns[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(lsns[i], 10))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(lsns[j], 10))
		}
		i = j + 1
	}
	return b.String()
}

// maxPartRange bounds one range of written LSNs a saved value may name:
// more than a partition ever holds above its mark.
const maxPartRange = 1 << 24

func parsePartMark(s string) (mark uint64, written []uint64, err error) {
	n, rest, _ := strings.Cut(s, " ")
	if mark, err = strconv.ParseUint(n, 10, 64); err != nil {
		return 0, nil, err
	}
	for r := range strings.SplitSeq(rest, ",") {
		if r == "" {
			continue
		}
		a, b, isRange := strings.Cut(r, "-")
		lo, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return 0, nil, err
		}
		hi := lo
		if isRange {
			if hi, err = strconv.ParseUint(b, 10, 64); err != nil {
				return 0, nil, err
			}
		}
		if hi < lo || hi-lo > maxPartRange {
			return 0, nil, fmt.Errorf("range %q", r)
		}
		for lsn := lo; lsn <= hi; lsn++ {
			written = append(written, lsn)
		}
	}
	return mark, written, nil
}
