package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/internal/prefault"
)

// A restart that rebuilds a large state asks the kernel for its memory
// ahead (internal/prefault), and says so in its "recovered" line: two
// tenants post 140 000 new tasks, the server is killed with -9, and the
// restart replays them all with the memory faulted in ahead.
func TestRestartFaultsItsStateInAhead(t *testing.T) {
	if testing.Short() {
		t.Skip("140 000 events: skipped with -short")
	}
	if !prefault.Available {
		t.Skip("no MADV_POPULATE_WRITE on this system")
	}
	t.Parallel()
	const perTenant, batch = 70_000, 1000
	d := newDeployment(t, false, newHook(t), deployOptions{config: "snapshot_every: 24h\nsnapshot_events: 0\nlimits:\n  ingest_per_second: 0\n"})
	d.start()
	d.postPending(perTenant, batch, 50)
	d.crash()
	var sys struct {
		Recovery struct{ Events int64 } `json:"recovery"`
	}
	d.do("", "GET", "/api/v1/system", "", &sys, 200)
	if sys.Recovery.Events != 2*perTenant {
		t.Errorf("the restart replayed %d records, want %d", sys.Recovery.Events, 2*perTenant)
	}
	d.api.kill() // its log is whole once it has exited
	var line string
	for l := range strings.Lines(d.api.out.String()) {
		if strings.Contains(l, "msg=recovered") {
			line = l
		}
	}
	mib := -1
	for f := range strings.FieldsSeq(line) {
		if v, ok := strings.CutPrefix(f, "prefaulted_mib="); ok {
			mib, _ = strconv.Atoi(v)
		}
	}
	// 140 000 records at 256 bytes each: 34 MiB.
	if mib < 32 {
		t.Errorf("the restart faulted %d MiB in ahead, want at least 32: %q", mib, line)
	}
}
