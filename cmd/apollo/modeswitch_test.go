package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/notify"
)

// A data directory of the all-in-one server given to apollo bus, the way
// from one process to three (docs/deploy.md: "the same data directory"):
// the bus does not read the rules the tenants set through the API
// (rules/), the silences and acknowledgements (alerts.json) nor the
// notifications owed (outbox.jsonl); the alert processes keep theirs in
// Redis. It started without a word, and
// the tenants' rules and silences were simply gone. It now says, for each
// file, what it holds and what to do.
func TestBusSaysWhatTheServersFilesHold(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h := newHook(t)
	d := newDeployment(t, true, h, deployOptions{}) // the bus's configuration, with Redis
	d.args[0] = "server"
	d.api = startApollo(t, d.args...)
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %s_failed task_prefix: %q ON: failed NOTIFY: hook\n"+
			"RULE %s_owed task_prefix: %q ON: failed NOTIFY: hook\n", tenant, tenant+"_f", tenant, tenant+"_o"), nil, 200)
		d.silence(tenant, fmt.Sprintf(`"rule":"%s_failed"`, tenant))
	}
	// A notification each that the channel, now down, cannot take.
	h.srv.Close()
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_owed")
	}
	outbox := filepath.Join(d.dir, "data", outboxFile)
	eventually(t, 30*time.Second, "two notifications owed", func() bool {
		owed, err := notify.OwedIn(outbox)
		return err == nil && len(owed) == len(tenants)
	})
	d.api.kill()

	d.args[0] = "bus"
	d.start()
	t.Cleanup(func() { d.logOnFailure() })
	d.alert.kill()
	d.api.kill()
	out := d.api.out.String()
	data := filepath.Join(d.dir, "data")
	for _, want := range []string{
		filepath.Join(data, "rules") + " holds the rules of 2 tenants", "apollo rules apply",
		filepath.Join(data, "alerts.json"), "2 silences", "apollo silence add",
		filepath.Join(data, outboxFile), "holds 2 notifications",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the bus on the server's data directory does not say %q:\n%s", want, out)
		}
	}
}
