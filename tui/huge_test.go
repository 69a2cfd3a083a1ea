package tui

import (
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/apollo-11/apollo"
)

// A server's task IDs and job names of a megabyte (ours takes 256 bytes
// at most; a server that is not ours, or a broken one, may send anything)
// cost the Tasks tab a second a row to escape, measure and cut, on every
// message: the dashboard hung. What a screen costs to draw does not grow
// with the length of the names on it: drawn with names of a megabyte it
// allocates about what it does with names of a line, and shows their
// ends and starts as with any long name.
func TestHugeNamesCostTheScreenNoMore(t *testing.T) {
	// Not Parallel: it counts the process's allocations (renderAlloc).
	if raceEnabled {
		t.Skip("counts allocations, which the race detector changes (race_on_test.go)")
	}
	draw := func(idLen int) (uint64, string) {
		m, err := New(Options{Server: "http://apollo.example:1969", Token: "test-token", Clock: apollo.NewFakeClock(t0), NoColor: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		var ts []apollo.Task
		for i := range 40 {
			id := "start-" + strings.Repeat("\x1b\u200d👩", idLen/8) + "-end" + string(rune('a'+i))
			ts = append(ts, apollo.Task{TaskID: id, Name: "job_" + strings.Repeat("日\u0301", idLen/5), Status: apollo.StatusFailed,
				Sequence: 1, UpdatedAt: ms(time.Duration(-i) * time.Second)})
		}
		m.store.replace(ts)
		m.paintTasks()
		m.tab = tabTasks
		m.render() // the first draw may size buffers
		bytes, out := renderAlloc(m)
		return bytes, ansi.Strip(out)
	}
	small, _ := draw(64)
	huge, out := draw(1 << 20)
	if huge > 4*small+1<<20 {
		t.Errorf("a screen of names of a megabyte allocated %d bytes, of names of a line %d", huge, small)
	}
	if !strings.Contains(out, "-enda") || !strings.Contains(out, "failed") || !strings.Contains(out, "job_日") {
		t.Errorf("the rows do not show the IDs' ends and the names' starts:\n%s", out)
	}
	checkCells(t, "huge names", out, ansi.WcWidth, 120, 40)
}

// renderAlloc is the fewest bytes m.render allocated over three draws,
// and the last draw. The counter is the process's: a test that measures
// with it runs alone (not Parallel), and the least of three leaves out
// what a goroutine of an earlier test allocated meanwhile
// (TestHugeAlertTextCostsTheScreenNoMore failed under -count=4 when it
// ran in parallel).
func renderAlloc(m *Model) (uint64, string) {
	least := uint64(math.MaxUint64)
	var out string
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out = m.render()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least, out
}
