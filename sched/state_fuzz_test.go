package sched

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apollo-11/apollo"
)

// FuzzStateFile: whatever the state file holds (a torn write, another
// version's, a hand edit), a scheduler starts on it, settles what it can,
// and stops, or refuses it with a StateError when it does not read; a file it reads back is the file it writes: saving what was
// loaded and loading that again gives the same state.
func FuzzStateFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"jobs":{"a":{"lastTick":"2026-01-01T00:00:00Z","paused":true}},"runs":{"a@20260101T000000Z#1":{"job":"a","attempt":1,"seq":3,"started":true,"group":12345,"leader":"x/1"}}}`))
	f.Add([]byte(`{"version":1,"jobs":{"a":{"lastTick":"9999-12-31T23:59:59Z"},"gone":{"paused":true,"filePaused":true}},"runs":{"":{"job":"","seq":-9223372036854775808},"x":{"job":"a","seq":9223372036854775807,"group":1,"leader":""}}}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"jobs":{"a":{"lastTick":"0001-01-01T00:00:00Z"}}}`))
	f.Add([]byte("{\"version\":1,\"runs\":{\"a\\u0000\\u001b[31m\":{\"job\":\"a\",\"seq\":2}}}"))
	const jobs = "jobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    command: [x]\n"
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, stateFileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		sf := &stateFile{dir: dir}
		st, loadErr := sf.load()
		if loadErr == nil {
			if err := sf.save(st); err != nil {
				t.Fatal(err)
			}
			again, err := sf.load()
			if err != nil {
				t.Fatalf("a state it wrote does not load: %v", err)
			}
			if len(again.Jobs) != len(st.Jobs) || len(again.Runs) != len(st.Runs) {
				t.Fatalf("saved and loaded again: %d jobs, %d runs; want %d, %d", len(again.Jobs), len(again.Runs), len(st.Jobs), len(st.Runs))
			}
			for id, r := range st.Runs {
				if again.Runs[id] != r {
					t.Fatalf("run %q: %+v, loaded again %+v", id, again.Runs[id], r)
				}
			}
		}
		clock := apollo.NewFakeClock(t0)
		s, err := newScheduler(mustParse(t, jobs), Options{Clock: clock, Reporter: newRecorder(), Logger: quietLogger(), StateDir: dir}, newFakeRunner(clock))
		if loadErr != nil {
			// Not read: refused, not overwritten.
			var se *StateError
			if !errors.As(err, &se) {
				t.Fatalf("New on %q, which does not load (%v): %v, want a StateError", data, loadErr, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatalf("start on %q: %v", data, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s.Stop(ctx)
	})
}
