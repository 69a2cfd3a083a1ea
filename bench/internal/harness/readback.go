package harness

import (
	"fmt"
	"sync"

	"github.com/apollo-11/apollo"
)

// Run is a run a drill had acknowledged: its task ID, its job, how many
// events it reported (sequences 1 to Events) and the status they ended in.
type Run struct {
	ID, Job string
	Events  int
	Final   apollo.Status
}

// ReadBack reads every run with GET base/api/v1/tasks/ID, 8 at a time, and
// returns how many of their acknowledged events are missing: all of a run
// the server does not know (404), the records short of Events for one it
// knows. Any other difference (another answer, a wrong end or sequence, a
// history out of order) is the error, the first one found; what is missing
// is a figure the drill reports, not an error.
func ReadBack(base string, runs []Run) (lost int64, err error) {
	var mu sync.Mutex
	ForEach(len(runs), 8, func(i int) {
		rn := runs[i]
		var task apollo.Task
		code, gerr := GetJSON(base+"/api/v1/tasks/"+rn.ID, &task)
		mu.Lock()
		defer mu.Unlock()
		fail := func(format string, a ...any) {
			if err == nil {
				err = fmt.Errorf("run %s: "+format, append([]any{rn.ID}, a...)...)
			}
		}
		switch {
		case gerr != nil:
			fail("%v", gerr)
			return
		case code == 404:
			lost += int64(rn.Events)
			return
		case code != 200:
			fail("status %d", code)
			return
		case task.Status != rn.Final || task.Sequence != int64(rn.Events) || len(task.History) != rn.Events:
			lost += int64(max(0, rn.Events-len(task.History)))
			fail("%v seq %d with %d records, want %v seq %d", task.Status, task.Sequence, len(task.History), rn.Final, rn.Events)
		}
		prev := apollo.StatusNone
		for i, h := range task.History {
			if h.Sequence != int64(i+1) || !apollo.CanTransition(prev, h.Status) {
				fail("history %d is seq %d %v after %v", i, h.Sequence, h.Status, prev)
			}
			prev = h.Status
		}
	})
	return lost, err
}
