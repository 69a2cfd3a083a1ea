package web_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/stream"
)

// failingList is the bus's listing that fails while fail is set, as a
// store that cannot be read does (Redis away, in the scale-out mode).
type failingList struct {
	stream.Bus
	fail *atomic.Bool
}

func (f failingList) List(tf apollo.TaskFilter) ([]apollo.Task, string, error) {
	if f.fail.Load() {
		return nil, "", errors.New("the task store did not answer")
	}
	return f.Bus.List(tf)
}

// A snapshot whose listing failed says so (its error field): the Tasks
// page showed "No task matches." over an empty table, as if the tenant
// had no task, while the server had not been able to say which it had.
// The page now says the listing failed, and shows what the stream sends
// meanwhile.
func TestSnapshotThatFailedIsSaidInBrowser(t *testing.T) {
	d := newDashboard(t, testTokens)
	var fail atomic.Bool
	d.streamBus = failingList{Bus: d.bus, fail: &fail}
	d.hub.Stop(t.Context())
	d.startStream()
	d.reportAs("admin-token", run("etl", "etl-before", "success", time.Now(), time.Second)...)
	fail.Store(true)
	b := newBrowser(t)
	b.signIn(d.srv.URL+"/tasks", "admin-token")
	b.until("the failed listing said", text("main")+`.includes("could not list the tasks")`)
	b.until("no claim that nothing matches", `!`+text("main")+`.includes("No task matches.")`)
	d.reportAs("admin-token", run("etl", "etl-after", "failed", time.Now(), time.Second)...)
	b.until("the stream's tasks meanwhile", `!!document.querySelector('tr[data-task="etl-after"]')`)
	b.screenshot("listing-failed")
	// A listing that works again (the page asks anew) says nothing more.
	fail.Store(false)
	b.do("reload", chromedp.Reload())
	b.until("the tasks listed", `!!document.querySelector('tr[data-task="etl-before"]')`)
	b.until("the failure no longer said", `!`+text("main")+`.includes("could not list the tasks")`)
}
