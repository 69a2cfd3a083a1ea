package bus

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// A snapshot of the first state format (testdata/state-v1.bin, written by
// the bus of commit a68f638: three tasks and a ping run still running in
// tenant "a", a ping run and a task in "b") still restores: each task gets
// the time of its oldest record as createdAt, the listing is in order, and
// the open ping runs are found. Written again, it reads back the same.
func TestReadStateVersion1(t *testing.T) {
	t.Parallel()
	v1, err := os.ReadFile("testdata/state-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	const t0ms = 1795946400000 // 2026-11-29T10:00:00Z: the first record
	check := func(what string, b *Bus) {
		t.Helper()
		for _, c := range []struct {
			tenant string
			want   []string
			at     []int64 // createdAt - t0ms
		}{
			{"a", []string{"a-wait", "backup@ping-1764410403000", "a-old"}, []int64{4000, 3000, 0}},
			{"b", []string{"b-1", "backup@ping-1764410405000"}, []int64{7000, 6000}},
		} {
			page, _, err := b.List(apollo.TaskFilter{Tenant: c.tenant})
			var ids []string
			var at []int64
			for _, tk := range page {
				ids, at = append(ids, tk.TaskID), append(at, tk.CreatedAt-t0ms)
			}
			if err != nil || !slices.Equal(ids, c.want) || !slices.Equal(at, c.at) {
				t.Errorf("%s: tenant %s lists %v created at %v, want %v at %v (%v)", what, c.tenant, ids, at, c.want, c.at, err)
			}
		}
		for tenant, want := range map[string]string{"a": "backup@ping-1764410403000", "b": "backup@ping-1764410405000"} {
			if run, ok := b.OpenPing(tenant, "backup"); !ok || run.TaskID != want || run.Sequence != 1 {
				t.Errorf("%s: tenant %s's open ping run of backup: %+v %v, want %s", what, tenant, run, ok, want)
			}
		}
		if task, err := b.Get("a", "a-wait"); err != nil || task.Status != apollo.StatusPending || len(task.History) != 1 {
			t.Errorf("%s: a-wait %+v, %v", what, task, err)
		}
		if st := b.Stats(); st.Tasks != 5 || st.Waiting != 1 {
			t.Errorf("%s: %d tasks, %d waiting; want 5 and 1", what, st.Tasks, st.Waiting)
		}
	}
	restore := func(state []byte) *Bus {
		b, err := New(Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ReadState(bytes.NewReader(state)); err != nil {
			t.Fatal(err)
		}
		return b
	}
	old := restore(v1)
	check("version 1", old)
	var v2 bytes.Buffer
	if err := old.WriteState(&v2); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(v2.Bytes(), []byte(stateMagic)) {
		t.Fatalf("written as %q", v2.Bytes()[:len(stateMagic)])
	}
	check("written again", restore(v2.Bytes()))
}

// byteForker is a Forker over byte buffers: the forked parts are joined in
// order before what is written next.
type byteForker struct {
	out   bytes.Buffer
	parts []*bytes.Buffer
}

func (f *byteForker) Write(p []byte) (int, error) {
	f.join()
	return f.out.Write(p)
}

func (f *byteForker) Fork(n int) []io.Writer {
	f.join()
	ws := make([]io.Writer, n)
	for i := range ws {
		b := new(bytes.Buffer)
		f.parts = append(f.parts, b)
		ws[i] = b
	}
	return ws
}

func (f *byteForker) join() {
	for _, p := range f.parts {
		f.out.Write(p.Bytes())
	}
	f.parts = nil
}

// A restored bus lists and pages its tasks exactly as the live one did, in
// the listing's order, for two tenants whose tasks were first seen in
// groups at the same millisecond (the listing then orders by task ID),
// whether the state was written to a plain writer or copied in parallel
// through a Forker. WriteState writes each tenant's tasks in the list's
// order, so that ReadState needs no sort; a snapshot written shard by
// shard, as before it did, or in any other order, is sorted and lists the
// same.
func TestRestoredListingPagesLikeTheLive(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for i := range 60 {
		var evs []apollo.Event
		for j := range 7 {
			for _, tenant := range []string{"acme", "globex"} {
				e := ev(fmt.Sprintf("%c%03d-%d", 'a'+(i*7+j)%5, i, j), 1, apollo.StatusRunning)
				e.Tenant = tenant
				evs = append(evs, e)
			}
		}
		f.publish(t, evs...)
		f.clock.Advance(time.Millisecond)
	}
	f.drain()
	pages := func(b *Bus, tenant string) []string {
		var ids []string
		var prevAt int64
		cursor := ""
		for {
			page, next, err := b.List(apollo.TaskFilter{Tenant: tenant, Limit: 9, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range page {
				// The listing's order: newest first, then higher IDs.
				if n := len(ids); n > 0 && !(prevAt > tk.CreatedAt || prevAt == tk.CreatedAt && ids[n-1] > tk.TaskID) {
					t.Fatalf("tenant %s lists %s (created %d) after %s (created %d)", tenant, tk.TaskID, tk.CreatedAt, ids[n-1], prevAt)
				}
				ids, prevAt = append(ids, tk.TaskID), tk.CreatedAt
			}
			if next == "" {
				return ids
			}
			cursor = next
		}
	}
	plain := new(bytes.Buffer)
	forked := new(byteForker)
	for _, w := range []io.Writer{plain, forked} {
		if err := f.bus.Checkpoint(func(uint64) error { return f.bus.WriteState(w) }); err != nil {
			t.Fatal(err)
		}
	}
	forked.join()
	byShard, reversed := new(bytes.Buffer), new(bytes.Buffer)
	writeStateInShardOrder(t, f.bus, byShard, false)
	writeStateInShardOrder(t, f.bus, reversed, true)
	for name, state := range map[string][]byte{"plain": plain.Bytes(), "forked": forked.out.Bytes()} {
		for tenant, inOrder := range listsInOrder(t, state) {
			if !inOrder {
				t.Errorf("%s: WriteState wrote tenant %s's tasks out of its list's order: ReadState has to sort them", name, tenant)
			}
		}
	}
	for tenant, inOrder := range listsInOrder(t, byShard.Bytes()) {
		if inOrder {
			t.Fatalf("tenant %s's tasks written shard by shard read as in order: the test does not reach the sort", tenant)
		}
	}
	for name, state := range map[string][]byte{"plain": plain.Bytes(), "forked": forked.out.Bytes(), "by shard": byShard.Bytes(), "reversed": reversed.Bytes()} {
		b, err := New(Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ReadState(bytes.NewReader(state)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, tenant := range []string{"acme", "globex"} {
			want, got := pages(f.bus, tenant), pages(b, tenant)
			if len(want) != 420 || !slices.Equal(got, want) {
				t.Errorf("%s, tenant %s: restored pages list %d tasks, live %d; equal: %v\n restored: %.12v\n live:     %.12v",
					name, tenant, len(got), len(want), slices.Equal(got, want), got, want)
			}
		}
	}
}

// writeStateInShardOrder writes b's state as WriteState did before it
// followed the lists: shard by shard, each shard's tasks in its map's
// order; reversed writes the tasks in the reverse of that order.
func writeStateInShardOrder(t *testing.T, b *Bus, w io.Writer, reversed bool) {
	t.Helper()
	var tasks []*task
	for i := range b.shards {
		b.shards[i].each(func(_ uint64, tk *task) { tasks = append(tasks, tk) })
	}
	if reversed {
		slices.Reverse(tasks)
	}
	buf := binary.AppendUvarint(append([]byte(nil), stateMagic...), uint64(len(tasks)))
	for _, tk := range tasks {
		buf = appendTask(buf, tk.key(), tk)
	}
	if _, err := w.Write(buf); err != nil {
		t.Fatal(err)
	}
	if err := b.writeTombs(w); err != nil {
		t.Fatal(err)
	}
}

// listsInOrder reads the tasks of a state as ReadState does and says, by
// tenant, whether they came in their list's order.
func listsInOrder(t *testing.T, state []byte) map[string]bool {
	t.Helper()
	b, err := New(Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sr := &stateReader{r: bufio.NewReader(bytes.NewReader(state[len(stateMagic):]))}
	sr.uvarint()
	listed, err := b.readTasks(sr, false)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	b.tenants.Range(func(name, ts any) bool {
		out[name.(string)] = listed[ts.(*tenantState)].inOrder
		return true
	})
	if len(out) != 2 {
		t.Fatalf("the state holds %d tenants, want 2", len(out))
	}
	return out
}
