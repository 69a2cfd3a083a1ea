package tui

import (
	"fmt"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// BenchmarkTaskChanges measures the dashboard's hot path, a tasks message
// from decoding to the repainted list, holding 5 000 tasks: 100 changes
// as one coalesced message (what the dashboard subscribes to) against the
// same 100 changes as 100 messages (coalesce: false). One op is 100
// changes either way.
func BenchmarkTaskChanges(b *testing.B) {
	const held, batch = 5000, 100
	frames := func(seq int64, per int) [][]byte {
		var out [][]byte
		for i := 0; i < batch; i += per {
			ts := make([]apollo.Task, per)
			for j := range ts {
				n := (i + j) * (held / batch)
				ts[j] = apollo.Task{TaskID: fmt.Sprintf("job_%03d-%05d", n%300, n), Name: fmt.Sprintf("job_%03d", n%300),
					Status: apollo.StatusSuccess, Sequence: seq, UpdatedAt: t0.UnixMilli() + seq, CostMs: 1200}
			}
			out = append(out, []byte(`{"type":"tasks","cursor":"c.1","tasks":`+mustJSON(ts)+`}`))
		}
		return out
	}
	for _, bc := range []struct {
		name string
		per  int
	}{{"coalesced-1x100", batch}, {"unthrottled-100x1", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			m, err := New(Options{Clock: apollo.NewFakeClock(t0), MaxTasks: held})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
			fill := make([]apollo.Task, held)
			for i := range fill {
				fill[i] = apollo.Task{TaskID: fmt.Sprintf("job_%03d-%05d", i%300, i), Name: fmt.Sprintf("job_%03d", i%300),
					Status: apollo.StatusRunning, Sequence: 1, UpdatedAt: t0.UnixMilli() - int64(i)}
			}
			m.store.replace(fill)
			m.paintTasks()
			// Distinct sequences per op so that every change applies.
			sets := make([][][]byte, 64)
			for i := range sets {
				sets[i] = frames(int64(2+i), bc.per)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%len(sets) == 0 && i > 0 { // start over from sequence 1
					b.StopTimer()
					m.store.replace(fill)
					b.StartTimer()
				}
				for _, data := range sets[i%len(sets)] {
					f, err := apiclient.DecodeFrame(data)
					if err != nil {
						b.Fatal(err)
					}
					m.Update(frameMsg{gen: m.conn.gen, f: f})
				}
			}
		})
	}
}
