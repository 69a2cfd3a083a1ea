package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/apiclient"
)

// Issue 20.4: a restart after kill -9 replays at most a bounded tail of
// the log, whatever the ingest rate: besides snapshot_every (here a day,
// so it never fires), a snapshot is taken once snapshot_events records
// were logged since the last. Two tenants post 1 200 events; the server is
// killed once a snapshot covers most of them, and the restart replays no
// more than the records logged after it, yet every task of both tenants
// is back.
func TestSnapshotsBoundTheReplayedTail(t *testing.T) {
	const every, perTenant, batch = 300, 600, 100
	d := newDeployment(t, false, newHook(t), deployOptions{config: fmt.Sprintf("snapshot_every: 24h\nsnapshot_events: %d\n", every)})
	d.start()
	d.postPending(perTenant, batch, 7)
	// The last snapshot due was at the record numbered 4 × every or later
	// (the count restarts from each snapshot's LSN).
	newest := func() uint64 {
		var lsn uint64
		snaps, _ := filepath.Glob(filepath.Join(d.dir, "data", "wal", "*.snap"))
		for _, f := range snaps {
			var n uint64
			if _, err := fmt.Sscanf(filepath.Base(f), "%020d.snap", &n); err == nil {
				lsn = max(lsn, n)
			}
		}
		return lsn
	}
	eventually(t, 0, "a snapshot taken by the count of records logged", func() bool { return newest() >= 2*perTenant-every })
	at := newest()
	if entries, err := os.ReadDir(filepath.Join(d.dir, "data", "wal")); err == nil {
		t.Logf("newest snapshot at LSN %d; %d files in wal/", at, len(entries))
	}
	d.crash()
	var sys struct {
		Recovery struct{ Events int64 } `json:"recovery"`
	}
	d.do("", "GET", "/api/v1/system", "", &sys, 200)
	if tail := int64(2*perTenant) - int64(at); sys.Recovery.Events > tail {
		t.Errorf("the restart replayed %d records, want at most the %d logged after the snapshot at %d", sys.Recovery.Events, tail, at)
	}
	if sys.Recovery.Events > every {
		t.Errorf("the restart replayed %d records, more than snapshot_events (%d)", sys.Recovery.Events, every)
	}
	for _, tenant := range tenants {
		var page apiclient.TaskPage
		d.do(tenant, "GET", "/api/v1/tasks?limit=1000", "", &page, 200)
		if len(page.Tasks) != perTenant {
			t.Errorf("%s: %d tasks after the restart, want %d", tenant, len(page.Tasks), perTenant)
		}
		for _, task := range page.Tasks {
			if task.Tenant != tenant || !strings.HasPrefix(task.TaskID, tenant+"-") {
				t.Fatalf("%s sees task %s of tenant %q", tenant, task.TaskID, task.Tenant)
			}
		}
	}
}

// postPending posts perTenant new pending tasks to each tenant, batch to a
// request: IDs "<tenant>-<number>", spread over jobs job names.
func (d *deployment) postPending(perTenant, batch, jobs int) {
	d.t.Helper()
	for i := 0; i < perTenant; i += batch {
		for _, tenant := range tenants {
			var body strings.Builder
			body.WriteByte('[')
			for j := i; j < min(i+batch, perTenant); j++ {
				if j > i {
					body.WriteByte(',')
				}
				fmt.Fprintf(&body, `{"taskID":"%s-%06d","name":"job_%d","sequence":1,"status":"pending","ts":1764000000000}`, tenant, j, j%jobs)
			}
			body.WriteByte(']')
			d.do(tenant, "POST", "/api/v1/events", body.String(), nil, 200)
		}
	}
}
