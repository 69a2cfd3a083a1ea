package expect

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// A Learner read back from its state proposes what the one it was
// written from proposes, for each tenant's job, and keeps doing so as
// runs go on: the rings continue where they were (a full one overwrites
// its oldest entry, not its first).
func TestLearnerStateRoundTrip(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a := NewLearner(0)
	feed := func(l *Learner, from, to int) {
		for i := from; i < to; i++ {
			for tenant, mm := range map[string]int{"": 7, "acme": 23} {
				at := t0.Add(time.Duration(i)*time.Hour + time.Duration(mm)*time.Minute)
				l.Started(Run{Tenant: tenant, Job: "etl", At: at})
				l.Finished(Run{Tenant: tenant, Job: "etl", At: at.Add(time.Minute), Status: apollo.StatusSuccess, Duration: time.Duration(60+i%5) * time.Second})
			}
		}
		l.Started(Run{Tenant: "acme", Job: "once", At: t0}) // too few runs for anything
	}
	feed(a, 0, SampleSize+5)
	var buf bytes.Buffer
	if err := a.WriteState(&buf); err != nil {
		t.Fatal(err)
	}
	b := NewLearner(0)
	b.Started(Run{Tenant: "other", Job: "gone", At: t0}) // replaced by the state
	if err := b.ReadState(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	same := func(when string) {
		t.Helper()
		for _, k := range []jobKey{{"", "etl"}, {"acme", "etl"}, {"acme", "once"}, {"other", "gone"}} {
			pa, oka := a.Suggest(k.tenant, k.job, nil)
			pb, okb := b.Suggest(k.tenant, k.job, nil)
			if oka != okb || fmt.Sprint(pa) != fmt.Sprint(pb) {
				t.Fatalf("%s: %v: %v %+v, read back %v %+v", when, k, oka, pa, okb, pb)
			}
		}
		if ja, jb := a.Jobs("acme"), b.Jobs("acme"); len(ja) != len(jb) {
			t.Fatalf("%s: acme's jobs %v, read back %v", when, ja, jb)
		}
	}
	same("read back")
	if p, _ := b.Suggest("acme", "etl", nil); p.Schedule != "23 * * * *" {
		t.Fatalf("acme's proposal: %+v", p)
	}
	feed(a, SampleSize+5, SampleSize+40)
	feed(b, SampleSize+5, SampleSize+40)
	same("after more runs")
}

// Damaged state is refused with an error, never a panic or a huge
// allocation; an empty Learner's state reads back empty.
func TestLearnerStateDamaged(t *testing.T) {
	t.Parallel()
	l := NewLearner(0)
	l.Started(Run{Tenant: "acme", Job: "etl", At: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)})
	var buf bytes.Buffer
	if err := l.WriteState(&buf); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	for n := range len(whole) {
		if err := NewLearner(0).ReadState(bytes.NewReader(whole[:n])); err == nil {
			t.Errorf("%d of %d bytes read without an error", n, len(whole))
		}
	}
	for name, b := range map[string][]byte{
		"version":   {9, 0},
		"long name": {learnStateVersion, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"count":     append([]byte{learnStateVersion, 1, 0, 0}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
	} {
		if err := NewLearner(0).ReadState(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
	var empty bytes.Buffer
	if err := NewLearner(0).WriteState(&empty); err != nil {
		t.Fatal(err)
	}
	e := NewLearner(0)
	if err := e.ReadState(&empty); err != nil {
		t.Fatal(err)
	}
	if jobs := e.Stats().Jobs; jobs != 0 {
		t.Fatalf("%d jobs from an empty state", jobs)
	}
}

// The learner proposes only what an expectation can hold: a job whose
// name holds a control character runs (events take it) but is neither
// kept nor proposed, and every proposal is a valid expectation.
func TestLearnerProposesOnlyNameableJobs(t *testing.T) {
	t.Parallel()
	l := NewLearner(0)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 12 {
		for _, tenant := range []string{"", "acme"} {
			for _, job := range []string{"tab\tjob", "esc\x1b[31m", "del\x7f", "plain"} {
				at := t0.Add(time.Duration(i) * time.Hour)
				l.Started(Run{Tenant: tenant, Job: job, At: at})
				l.Finished(Run{Tenant: tenant, Job: job, At: at, Status: apollo.StatusSuccess, Duration: time.Second})
			}
		}
	}
	for _, tenant := range []string{"", "acme"} {
		if jobs := l.Jobs(tenant); fmt.Sprint(jobs) != "[plain]" {
			t.Errorf("tenant %q: the learner keeps %q", tenant, jobs)
		}
		p, ok := l.Suggest(tenant, "plain", nil)
		if !ok {
			t.Fatalf("tenant %q: no proposal for plain", tenant)
		}
		if _, err := NewSet([]Expectation{p.Expectation}); err != nil {
			t.Errorf("tenant %q: the proposal %+v is refused: %v", tenant, p.Expectation, err)
		}
	}
	if _, ok := Suggest("tab\tjob", hourlyStarts(t0), nil, nil); ok {
		t.Error("a proposal for a job no expectation can name")
	}
	if err := CheckJob("tab\tjob"); err == nil {
		t.Error("CheckJob took a control character")
	}
	if err := CheckJob("报表_日"); err != nil {
		t.Error(err)
	}
}

func hourlyStarts(t0 time.Time) []time.Time {
	var ts []time.Time
	for i := range 12 {
		ts = append(ts, t0.Add(time.Duration(i)*time.Hour))
	}
	return ts
}

// The learner's snapshot section reads any bytes without panicking, and
// what it reads it writes and reads back the same.
func FuzzLearnerState(f *testing.F) {
	l := NewLearner(0)
	l.Started(Run{Tenant: "acme", Job: "etl", At: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)})
	l.Finished(Run{Tenant: "", Job: "etl", Status: apollo.StatusSuccess, Duration: time.Second})
	var buf bytes.Buffer
	if err := l.WriteState(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte{})
	f.Add([]byte{learnStateVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		a := NewLearner(0)
		if err := a.ReadState(bytes.NewReader(b)); err != nil {
			return
		}
		var out bytes.Buffer
		if err := a.WriteState(&out); err != nil {
			t.Fatal(err)
		}
		c := NewLearner(0)
		if err := c.ReadState(bytes.NewReader(out.Bytes())); err != nil {
			t.Fatalf("what was read does not read back: %v", err)
		}
		if fmt.Sprint(a.Stats()) != fmt.Sprint(c.Stats()) {
			t.Fatalf("%+v read back as %+v", a.Stats(), c.Stats())
		}
	})
}
