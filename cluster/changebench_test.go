package cluster

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/apollo-11/apollo"
)

// benchChange is a change as a benchmark run applies them: a task of one
// tenant going from pending to running.
func benchChange() apollo.Change {
	const at = 1_764_547_200_000
	prev := apollo.Task{TaskID: "bench-000123-4", Name: "job-07", Tenant: "t1", Status: apollo.StatusPending, Sequence: 1,
		CreatedAt: at + 2, UpdatedAt: at + 2}
	task := prev
	task.Status, task.Sequence, task.StartedAt, task.UpdatedAt = apollo.StatusRunning, 2, at+10, at+12
	return apollo.Change{
		Record: apollo.Record{Event: apollo.Event{TaskID: "bench-000123-4", Name: "job-07", Sequence: 2, Status: apollo.StatusRunning,
			Ts: at + 10, Tenant: "t1"}, ReceivedAt: at + 12},
		Prev: apollo.BeforeOf(&prev), Task: task,
	}
}

// BenchmarkPublishChange is what adding one change to its batch costs a
// publisher: JSON by encoding/json in a fresh buffer, copied after its
// length (the form before issue 20.5's binary one), and the binary form,
// written in place (now).
func BenchmarkPublishChange(b *testing.B) {
	c := benchChange()
	for _, form := range []struct {
		name string
		add  func(batch []byte) []byte
	}{
		{"json", func(batch []byte) []byte {
			js, _ := json.Marshal(&c)
			return append(binary.AppendUvarint(batch, uint64(len(js))), js...)
		}},
		{"binary-in-place", func(batch []byte) []byte {
			batch, _ = appendChange(batch, &c)
			return batch
		}},
	} {
		b.Run(form.name, func(b *testing.B) {
			batch := make([]byte, 0, 64<<10)
			size := len(form.add(nil))
			b.ReportAllocs()
			for b.Loop() {
				if len(batch) >= maxChangeBatch {
					batch = batch[:0]
				}
				batch = form.add(batch)
			}
			b.ReportMetric(float64(size), "bytes/change")
		})
	}
}

// BenchmarkDecodeChanges is what reading a change of a batch costs every
// node whose stream listens, in the JSON form and in the binary one.
func BenchmarkDecodeChanges(b *testing.B) {
	c := benchChange()
	const n = 64
	jsonBatch, binBatch := []byte(changesMagic), []byte(changesBinMagic)
	for range n {
		js, _ := json.Marshal(&c)
		jsonBatch = append(binary.AppendUvarint(jsonBatch, uint64(len(js))), js...)
		binBatch, _ = appendChange(binBatch, &c)
	}
	for _, form := range []struct {
		name string
		data []byte
	}{{"json", jsonBatch}, {"binary", binBatch}} {
		b.Run(form.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeChanges(form.data, func(*apollo.Change) {}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/change")
		})
	}
}
