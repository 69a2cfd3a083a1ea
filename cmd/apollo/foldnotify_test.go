package main

import (
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	netmail "net/mail"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/emersion/go-smtp"
)

// mailServer is a real SMTP server (go-smtp, no TLS, no login) that
// answers 421 to every message while down is set, and hands each message
// it takes to got.
type mailServer struct {
	port    int
	down    atomic.Bool
	refused chan struct{}
	got     chan *netmail.Message
}

func startMailServer(t *testing.T) *mailServer {
	t.Helper()
	ms := &mailServer{refused: make(chan struct{}, 1000), got: make(chan *netmail.Message, 1000)}
	s := smtp.NewServer(ms)
	s.Domain, s.AllowInsecureAuth = "localhost", true
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms.port = l.Addr().(*net.TCPAddr).Port
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })
	return ms
}

func (ms *mailServer) NewSession(*smtp.Conn) (smtp.Session, error) { return &mailSession{ms: ms}, nil }

type mailSession struct{ ms *mailServer }

func (s *mailSession) Mail(string, *smtp.MailOptions) error {
	if s.ms.down.Load() {
		s.ms.refused <- struct{}{}
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "down for maintenance"}
	}
	return nil
}
func (s *mailSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *mailSession) Data(r io.Reader) error {
	m, err := netmail.ReadMessage(r)
	if err != nil {
		return err
	}
	s.ms.got <- m
	return nil
}
func (s *mailSession) Reset()        {}
func (s *mailSession) Logout() error { return nil }

// next returns the next mail's subject and plain-text body.
func (ms *mailServer) next(t *testing.T) (subject, text string) {
	t.Helper()
	var m *netmail.Message
	select {
	case m = <-ms.got:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no mail")
	}
	subject, _ = new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	_, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := mr.NextPart() // decodes quoted-printable
		if err != nil {
			t.Fatalf("mail %q has no text part: %v", subject, err)
		}
		if strings.HasPrefix(p.Header.Get("Content-Type"), "text/plain") {
			b, _ := io.ReadAll(p)
			return subject, string(b)
		}
	}
}

// An email channel and a webhook are both down while two tenants' alerts
// pile up in their queues, then both come back. The mail channel, read by
// people, sends the message it was retrying and then one mail that says
// how many notifications waited and lists every one; the webhook, read by
// a machine, gets every notification as its own request, none folded.
// Before, the mail channel sent the backlog one mail each, in a row (a
// storm of mails after every outage); the fold tried once for every
// channel (8c21b01) cut the webhook's digest at 100 notifications.
func TestBacklogAfterAnOutageIsOneMailButEachWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	_, ms, h, hookDown, want := backlogWhileBothDown(t)
	ms.down.Store(false)
	hookDown.Store(false)

	// The webhook: each notification once, on its own.
	eachAtTheWebhookOnce(t, h, want)
	// The mail: the one retried, then one mail of the rest.
	first, _ := ms.next(t)
	subject, text := ms.next(t)
	if wantSubject := fmt.Sprintf("%d notifications", len(want)-1); subject != wantSubject {
		t.Fatalf("the second mail after the outage is %q, want %q: the backlog folded into one\n%s", subject, wantSubject, text)
	}
	if !strings.Contains(text, "while the channel was down") {
		t.Errorf("the fold does not say why it folds:\n%s", text)
	}
	for key := range want {
		if job := key[strings.Index(key, "/")+1:]; !strings.Contains(first+"\n"+text, job) {
			t.Errorf("%s is in neither mail:\n%s\n%s", key, first, text)
		}
	}
}

// What a process killed with SIGKILL still owed goes out after the restart
// like the backlog of an outage: one mail that lists every one, while the
// webhook gets each on its own. Two tenants' alerts pile up while both
// channels are down; the server is killed, both channels come back, and
// the server starts again with the channels up. Before, the restarted
// lane had seen no failure of its own, so the mail channel sent what it
// owed one mail each, in a row.
func TestOwedAfterARestartIsOneMailButEachWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	d, ms, h, hookDown, want := backlogWhileBothDown(t)
	d.api.kill()
	ms.down.Store(false)
	hookDown.Store(false)
	d.start()

	// The mail: one, of every one owed.
	subject, text := ms.next(t)
	if wantSubject := fmt.Sprintf("%d notifications", len(want)); subject != wantSubject {
		t.Fatalf("the first mail after the restart is %q, want %q: what was owed folded into one\n%s", subject, wantSubject, text)
	}
	for key := range want {
		if job := key[strings.Index(key, "/")+1:]; !strings.Contains(text, job) {
			t.Errorf("%s is not in the mail:\n%s", key, text)
		}
	}
	// The webhook: each notification once, on its own.
	eachAtTheWebhookOnce(t, h, want)
}

// backlogWhileBothDown starts a server with a mail channel and a webhook,
// both down, and fails 8 jobs of each tenant under a rule that
// notifies both, until every notification waits in both channels' queues.
// want holds tenant/job of each.
func backlogWhileBothDown(t *testing.T) (d *deployment, ms *mailServer, h *hook, hookDown *atomic.Bool, want map[string]bool) {
	t.Helper()
	const jobs = 8 // of each tenant
	ms = startMailServer(t)
	ms.down.Store(true)
	h, hookDown, _ = downHook(t)
	d = newDeployment(t, false, h, deployOptions{repeat: "1h", hook: fmt.Sprintf(
		"  mail:\n    type: email\n    host: 127.0.0.1\n    port: %d\n    tls: none\n    from: alerts@example.com\n    to: [oncall@example.com]\n    tenants: [\"*\"]\n", ms.port)})
	d.start()
	t.Cleanup(d.logOnFailure)

	want = map[string]bool{} // tenant/job of every notification
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_each task_prefix: "%[1]s_job" BY: name WINDOW: 5m THRESHOLD: failed >= 1 NOTIFY: mail, hook`+"\n", tenant), nil, 200)
	}
	for i := range jobs {
		for _, tenant := range tenants {
			job := fmt.Sprintf("%s_job_%d", tenant, i)
			d.fail(tenant, job)
			want[tenant+"/"+job] = true
		}
	}
	select {
	case <-ms.refused:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the mail server was never called")
	}
	queued := func(channel string) int64 {
		var sys struct {
			Notifications struct {
				Channels map[string]struct{ Queued int64 }
			}
		}
		d.do("", "GET", "/api/v1/system", "", &sys, 200)
		return sys.Notifications.Channels[channel].Queued
	}
	eventually(t, time.Minute, "every notification handed to both channels", func() bool {
		return queued("mail") >= 2*jobs && queued("hook") >= 2*jobs
	})
	return d, ms, h, hookDown, want
}

// eachAtTheWebhookOnce waits for every notification of want at the
// webhook, each a firing on its own, none twice, none folded.
func eachAtTheWebhookOnce(t *testing.T, h *hook, want map[string]bool) {
	t.Helper()
	got := map[string]bool{}
	for len(got) < len(want) {
		p := h.await(t, time.Minute, "each notification at the webhook", func(p webhook.ApolloPayload) bool { return !strings.HasPrefix(p.Alert.Rule, "apollo:") })
		key := p.Alert.Tenant + "/" + p.Alert.Group
		if p.Kind != "firing" || !want[key] || got[key] {
			t.Fatalf("the webhook got a %s of %s (told before: %v): want each firing once, none folded", p.Kind, key, got[key])
		}
		got[key] = true
	}
}
