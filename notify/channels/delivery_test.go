package channels

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// watchLog hands every recorded Attempt to the test.
type watchLog struct {
	notify.AttemptLog
	c chan notify.Attempt
}

func (w *watchLog) Record(a notify.Attempt) { w.AttemptLog.Record(a); w.c <- a }

// ceiling is the longest backoff after a failed try: base 1s doubling,
// capped at 5m. Advancing the fake clock by it always fires the timer,
// whatever the jitter drew.
func ceiling(try int) time.Duration { return min(5*time.Minute, time.Second<<(try-1)) }

// deliverUntilDone sends one notification through a dispatcher with the
// built channel and drives the fake clock through its retries: after each
// retryable failure it advances past the longest backoff, and whenever the
// endpoint reports a hung request (hung) it advances past the attempt
// timeout. It returns every Attempt until the last.
func deliverUntilDone(t *testing.T, ch notify.Channel, hung <-chan struct{}) []notify.Attempt {
	t.Helper()
	clk := apollo.NewFakeClock(t0)
	log := &watchLog{AttemptLog: notify.NewMemoryLog(100), c: make(chan notify.Attempt, 100)}
	d, err := notify.NewDispatcher([]notify.Channel{ch}, notify.Options{Clock: clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	d.Send(apollo.Notification{Kind: apollo.NotifyFiring, Channels: []string{ch.Name}, DedupKey: "k", At: t0,
		Alert: apollo.Alert{ID: "a1", Rule: "batch_failures", Group: "batch_", Severity: apollo.SeverityCritical, StartedAt: t0}})
	var got []notify.Attempt
	for {
		select {
		case a := <-log.c:
			got = append(got, a)
			if a.Outcome != notify.OutcomeRetrying {
				st := d.Stats().Channels[ch.Name]
				if st.Retried != int64(len(got)-1) {
					t.Errorf("stats %+v after %d attempts", st, len(got))
				}
				return got
			}
			if !clk.BlockUntil(1, testwait.Timeout(t)) {
				t.Fatal("no backoff timer armed")
			}
			clk.Advance(ceiling(a.Try))
		case <-hung:
			clk.Advance(ch.Timeout)
		case <-time.After(testwait.Timeout(t)):
			t.Fatalf("stuck after %d attempts: %+v", len(got), got)
		}
	}
}

// checkGaveUp: tries 1..n in order, all retrying but the last, which gave
// up only because the next wait could pass GiveUpAfter. The test moves the
// clock by the longest backoff, past the one the lane drew, so a try may
// start up to one ceiling later than the lane planned.
func checkGaveUp(t *testing.T, got []notify.Attempt, giveUp time.Duration, errPart string) {
	t.Helper()
	last := got[len(got)-1]
	if len(got) < 3 || last.Outcome != notify.OutcomeGaveUp {
		t.Fatalf("want several retries then gave_up, got %+v", got)
	}
	deadline := got[0].At.Add(giveUp)
	for i, a := range got {
		if a.Try != i+1 || a.AlertID != "a1" || !strings.Contains(a.Error, errPart) || strings.Contains(a.Error, "s3cr3t") {
			t.Fatalf("attempt %d: %+v", i+1, a)
		}
		if i > 0 && a.At.After(deadline.Add(ceiling(i))) {
			t.Fatalf("attempt %d at %s, past the deadline %s", i+1, a.At.Sub(t0), deadline.Sub(t0))
		}
	}
	if !last.At.Add(ceiling(last.Try)).After(deadline) {
		t.Fatalf("gave up at %s, though even the longest wait would end before %s", last.At.Sub(t0), deadline.Sub(t0))
	}
}

func TestServerErrorIsRetriedUntilGiveUp(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer srv.Close()
	ch, err := Build("hook", "webhook", map[string]any{"url": srv.URL + "/x?token=s3cr3t", "give_up_after": "2m"}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := deliverUntilDone(t, ch, nil)
	checkGaveUp(t, got, 2*time.Minute, "500 Internal Server Error")
	if int(hits.Load()) != len(got) {
		t.Fatalf("%d requests for %d attempts", hits.Load(), len(got))
	}
}

func TestTimeoutIsRetriedUntilGiveUp(t *testing.T) {
	t.Parallel()
	hung := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		// Read the body: only then does the server notice the client
		// hanging up and cancel r.Context().
		_, _ = io.Copy(io.Discard, r.Body)
		hung <- struct{}{}
		<-r.Context().Done() // never answers; the attempt's timeout ends it
	}))
	defer srv.Close()
	ch, err := Build("hook", "slack", map[string]any{"url": srv.URL + "/services/T0001/B0001/s3cr3tXXXXXXXXXXXXXXXX", "timeout": "5s", "give_up_after": "1m"}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkGaveUp(t, deliverUntilDone(t, ch, hung), time.Minute, "no answer")
}

func TestConnectionRefusedIsRetriedUntilGiveUp(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	// No rate limit: the driver moves the clock for backoffs only.
	ch, err := Build("ding", "dingtalk", map[string]any{"url": "http://" + addr + "/robot/send?access_token=s3cr3t",
		"give_up_after": "1m", "rate_per_minute": 0}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkGaveUp(t, deliverUntilDone(t, ch, nil), time.Minute, "refused")
}

func dingRobot(t *testing.T, answer string) (string, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/robot/send?access_token=s3cr3t", &hits
}

func TestDingTalkTooFastIsRetriedUntilGiveUp(t *testing.T) {
	t.Parallel()
	u, hits := dingRobot(t, `{"errcode":130101,"errmsg":"send too fast, exceed 20 times per minute"}`)
	ch, err := Build("ding", "dingtalk", map[string]any{"url": u, "give_up_after": "2m", "rate_per_minute": 0}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := deliverUntilDone(t, ch, nil)
	checkGaveUp(t, got, 2*time.Minute, "errcode 130101")
	if int(hits.Load()) != len(got) {
		t.Fatalf("%d requests for %d attempts", hits.Load(), len(got))
	}
}

func TestDingTalkBadKeywordFailsOnce(t *testing.T) {
	t.Parallel()
	u, hits := dingRobot(t, `{"errcode":310000,"errmsg":"keywords not in content"}`)
	ch, err := Build("ding", "dingtalk", map[string]any{"url": u}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := deliverUntilDone(t, ch, nil)
	if len(got) != 1 || got[0].Outcome != notify.OutcomeFailed || got[0].Try != 1 || !strings.Contains(got[0].Error, "310000") || hits.Load() != 1 {
		t.Fatalf("%+v, %d requests", got, hits.Load())
	}
}
