package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/notifytest"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

const target = "/hook?token=t0k3n"

func message(kind apollo.NotificationKind, id, group string) *notify.Message {
	a := apollo.Alert{ID: id, Rule: "batch_failures", Group: group, State: apollo.AlertFiring, Severity: apollo.SeverityCritical,
		Labels: map[string]string{"team": "data"}, Summary: "failed_rate 0.2 > 0.05", Value: 0.2,
		StartedAt: t0.Add(-2 * time.Minute), FiredAt: t0}
	if kind == apollo.NotifyResolved {
		a.State, a.ResolvedAt = apollo.AlertResolved, t0.Add(time.Hour)
	}
	return &notify.Message{Notification: apollo.Notification{Kind: kind, Alert: a, Channels: []string{"hook"}, DedupKey: id + ":" + string(kind), At: t0},
		Title: "[" + string(kind) + "] batch_failures", Text: "failed_rate 0.2 > 0.05"}
}

func send(t *testing.T, cfg Config, opts notify.NotifierOptions, m *notify.Message) notifytest.Request {
	t.Helper()
	return notifytest.Endpoint{Target: target}.Receive(t, func(u string) (notify.Notifier, error) {
		cfg.URL = notify.SecretURL(u)
		return New(cfg, opts)
	}, m)
}

func TestApolloPayload(t *testing.T) {
	t.Parallel()
	r := send(t, Config{}, notify.NotifierOptions{}, message(apollo.NotifyFiring, "a1", "batch_"))
	want := `{"kind":"firing","alert":{"id":"a1","rule":"batch_failures","group":"batch_","state":"firing","severity":"critical","labels":{"team":"data"},"summary":"failed_rate 0.2 > 0.05","value":0.2,"startedAt":"2025-03-04T05:04:07Z","firedAt":"2025-03-04T05:06:07Z"},"channels":["hook"],"dedupKey":"a1:firing","at":"2025-03-04T05:06:07Z","title":"[firing] batch_failures","text":"failed_rate 0.2 > 0.05"}`
	if r.Body != want {
		t.Fatalf("payload\n got %s\nwant %s", r.Body, want)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("content type %q", ct)
	}
}

func TestApolloPayloadOfDigest(t *testing.T) {
	t.Parallel()
	d := &notify.Message{Notification: apollo.Notification{Kind: notify.KindDigest, Channels: []string{"hook"}, At: t0}, Title: "2 notifications",
		Digest: []*notify.Message{message(apollo.NotifyFiring, "a1", "batch_"), message(apollo.NotifyFiring, "a2", "etl_")}}
	r := send(t, Config{}, notify.NotifierOptions{}, d)
	for _, w := range []string{`"kind":"digest"`, `"title":"2 notifications"`, `"notifications":[{"kind":"firing","alert":{"id":"a1"`, `{"kind":"firing","alert":{"id":"a2"`} {
		if !strings.Contains(r.Body, w) {
			t.Errorf("%s missing from %s", w, r.Body)
		}
	}
}

func TestAlertmanagerPayload(t *testing.T) {
	t.Parallel()
	opts := notify.NotifierOptions{Name: "am", ExternalURL: "https://apollo.example.com"}
	r := send(t, Config{Format: FormatAlertmanager}, opts, message(apollo.NotifyResolved, "a1", "batch_"))
	labels := map[string]string{"alertname": "batch_failures", "group": "batch_", "severity": "critical", "team": "data"}
	want := `{"version":"4","groupKey":"{}:{alertname=\"batch_failures\", group=\"batch_\"}","truncatedAlerts":0,"status":"resolved","receiver":"am",` +
		`"groupLabels":{"alertname":"batch_failures","group":"batch_"},` +
		`"commonLabels":{"alertname":"batch_failures","group":"batch_","severity":"critical","team":"data"},` +
		`"commonAnnotations":{"description":"failed_rate 0.2 > 0.05","summary":"failed_rate 0.2 > 0.05","value":"0.2"},` +
		`"externalURL":"https://apollo.example.com","alerts":[{"status":"resolved",` +
		`"labels":{"alertname":"batch_failures","group":"batch_","severity":"critical","team":"data"},` +
		`"annotations":{"description":"failed_rate 0.2 > 0.05","summary":"failed_rate 0.2 > 0.05","value":"0.2"},` +
		`"startsAt":"2025-03-04T05:06:07Z","endsAt":"2025-03-04T06:06:07Z","generatorURL":"https://apollo.example.com/alerts/a1",` +
		`"fingerprint":"` + fingerprint(labels) + `"}]}`
	if r.Body != want {
		t.Fatalf("payload\n got %s\nwant %s", r.Body, want)
	}
	// A firing alert has a zero endsAt, as Alertmanager sends it.
	r = send(t, Config{Format: FormatAlertmanager}, opts, message(apollo.NotifyFiring, "a1", "batch_"))
	if !strings.Contains(r.Body, `"status":"firing"`) || !strings.Contains(r.Body, `"endsAt":"0001-01-01T00:00:00Z"`) {
		t.Fatalf("%s", r.Body)
	}
}

func TestAlertmanagerDigestHasCommonLabelsOnly(t *testing.T) {
	t.Parallel()
	d := &notify.Message{Notification: apollo.Notification{Kind: notify.KindDigest},
		Digest: []*notify.Message{message(apollo.NotifyFiring, "a1", "batch_"), message(apollo.NotifyResolved, "a2", "etl_")}}
	p := alertmanagerPayload(d, "am", "")
	if len(p.Alerts) != 2 || p.Status != "firing" || p.CommonLabels["group"] != "" || p.CommonLabels["team"] != "data" ||
		p.GroupKey != `{}:{alertname="batch_failures"}` || p.Alerts[0].Fingerprint == p.Alerts[1].Fingerprint {
		t.Fatalf("%+v", p)
	}
}

// The SMS example of docs/notifications.md, sent as written there.
func TestTemplateBodyForSMSGateway(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Headers:  map[string]notify.Secret{"Authorization": "Bearer sms-t0k3n"},
		Template: `{"to": ["+8613800000000"], "text": {{json (printf "%s: %s" .Title .Notification.Alert.Summary)}}}`,
	}
	r := send(t, cfg, notify.NotifierOptions{}, message(apollo.NotifyFiring, "a1", "batch_"))
	if want := `{"to": ["+8613800000000"], "text": "[firing] batch_failures: failed_rate 0.2 > 0.05"}`; r.Body != want {
		t.Fatalf("body\n got %s\nwant %s", r.Body, want)
	}
	if r.Header.Get("Authorization") != "Bearer sms-t0k3n" {
		t.Fatalf("headers %v", r.Header)
	}
	// A form body with its own content type.
	cfg = Config{Headers: map[string]notify.Secret{"Content-Type": "application/x-www-form-urlencoded"},
		Template: `mobile=13800000000&content={{urlquery .Title}}`}
	r = send(t, cfg, notify.NotifierOptions{}, message(apollo.NotifyFiring, "a1", "batch_"))
	if r.Body != "mobile=13800000000&content=%5Bfiring%5D+batch_failures" || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		t.Fatalf("%q %v", r.Body, r.Header)
	}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	notifytest.CheckFailures(t, target, "t0k3n", func(u string) (notify.Notifier, error) {
		return New(Config{URL: notify.SecretURL(u)}, notify.NotifierOptions{})
	}, message(apollo.NotifyFiring, "a1", "g"), []notifytest.Failure{
		{Name: "500", Status: 500, Retryable: true, ErrPart: "500"},
		{Name: "503", Status: 503, Retryable: true, ErrPart: "503"},
		{Name: "429", Status: 429, Retryable: true, ErrPart: "429"},
		{Name: "400", Status: 400, ErrPart: "400"},
		{Name: "401", Status: 401, ErrPart: "401"},
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	const u = "https://example.com/hook"
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"format", Config{URL: u, Format: "prometheus"}, "format: unknown format prometheus"},
		{"both", Config{URL: u, Format: "apollo", Template: "x"}, "template: template and format both"},
		{"parse", Config{URL: u, Template: "{{.Title"}, "template: template does not parse"},
		{"exec", Config{URL: u, Template: "{{.Nope}}"}, "template: template fails on a sample message"},
		{"header", Config{URL: u, Headers: map[string]notify.Secret{"Bad Name": "x"}}, "headers: bad header name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg, notify.NotifierOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v", err)
			}
		})
	}
}

// Two tenants whose rules share a name and a group, on a shared
// Alertmanager-format channel: receivers key incidents on groupKey (and
// group on groupLabels), so team-a's resolved message must never close
// team-b's incident. The tenant is a group label when the alerts have one.
func TestAlertmanagerGroupKeyNamesTheTenant(t *testing.T) {
	t.Parallel()
	keys := map[string]string{}
	for _, tenant := range []string{"team-a", "team-b", ""} {
		m := message(apollo.NotifyResolved, "id-"+tenant, "batch_")
		m.Notification.Alert.Tenant = tenant
		p := alertmanagerPayload(m, "am", "")
		if other, dup := keys[p.GroupKey]; dup {
			t.Fatalf("tenants %q and %q share the group key %s", other, tenant, p.GroupKey)
		}
		keys[p.GroupKey] = tenant
		if p.GroupLabels["tenant"] != tenant {
			t.Errorf("tenant %q: group labels %v", tenant, p.GroupLabels)
		}
	}
	// A digest of two tenants' alerts has no common tenant to group by.
	a, b := message(apollo.NotifyFiring, "a1", "batch_"), message(apollo.NotifyFiring, "b1", "batch_")
	a.Notification.Alert.Tenant, b.Notification.Alert.Tenant = "team-a", "team-b"
	p := alertmanagerPayload(&notify.Message{Notification: apollo.Notification{Kind: notify.KindDigest}, Digest: []*notify.Message{a, b}}, "am", "")
	if _, ok := p.GroupLabels["tenant"]; ok || p.Alerts[0].Labels["tenant"] != "team-a" || p.Alerts[1].Labels["tenant"] != "team-b" {
		t.Fatalf("digest of two tenants: group labels %v, alerts %+v", p.GroupLabels, p.Alerts)
	}
}

// A receiver that keys incidents on dedupKey (a bridge to a pager's
// dedup_key, say) keeps tenants apart: two tenants' rules of the same name
// and group have the same key inside Apollo-11 (the dedup lock adds the
// tenant), and the body's key names the tenant; the default tenant's key
// is as it was. A digest's notifications carry theirs likewise.
func TestDedupKeyNamesTheTenant(t *testing.T) {
	t.Parallel()
	keys := map[string]string{}
	for _, tenant := range []string{"team-a", "team-b", ""} {
		m := message(apollo.NotifyFiring, "a1", "batch_")
		m.Notification.Alert.Tenant = tenant
		var body struct {
			DedupKey string `json:"dedupKey"`
		}
		if err := json.Unmarshal([]byte(send(t, Config{}, notify.NotifierOptions{}, m).Body), &body); err != nil {
			t.Fatal(err)
		}
		if other, dup := keys[body.DedupKey]; dup {
			t.Fatalf("tenants %q and %q share the dedupKey %q", other, tenant, body.DedupKey)
		}
		keys[body.DedupKey] = tenant
		if tenant == "" && body.DedupKey != "a1:firing" {
			t.Errorf("the default tenant's dedupKey %q, want a1:firing", body.DedupKey)
		}
	}
	a, b := message(apollo.NotifyFiring, "a1", "batch_"), message(apollo.NotifyFiring, "a1", "batch_")
	a.Notification.Alert.Tenant, b.Notification.Alert.Tenant = "team-a", "team-b"
	d := &notify.Message{Notification: apollo.Notification{Kind: notify.KindDigest, Channels: []string{"hook"}, At: t0}, Digest: []*notify.Message{a, b}}
	var body struct {
		Notifications []struct {
			DedupKey string `json:"dedupKey"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal([]byte(send(t, Config{}, notify.NotifierOptions{}, d).Body), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Notifications) != 2 || body.Notifications[0].DedupKey == body.Notifications[1].DedupKey {
		t.Fatalf("a digest of two tenants' notifications: %+v", body.Notifications)
	}
}

// A storm folded into one digest under a rate limit reaches a receiver
// behind nginx, whose default client_max_body_size is 1 MiB: 1000 storm
// notifications of two tenants, each naming its ten worst jobs, go out as
// a digest that lists the first ones in full, and the rest wait for the
// next turns (a webhook's receiver must learn of each; before, they were
// counted as omitted and never sent). Before that, the body listed all
// 1000 (over 1 MiB), the receiver answered 413, and the digest, with every
// notification in it, was recorded as failed.
func TestDigestOfAStormFitsAReceiverLimit(t *testing.T) {
	t.Parallel()
	const storm, limit = 1000, 1 << 20
	got, refused := make(chan []byte, 10), make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			http.Error(w, "413 Request Entity Too Large", http.StatusRequestEntityTooLarge)
			refused <- struct{}{}
			return
		}
		got <- b
	}))
	t.Cleanup(srv.Close)
	for _, format := range []string{FormatApollo, FormatAlertmanager} {
		t.Run(format, func(t *testing.T) {
			clk := apollo.NewFakeClock(t0)
			hook, err := New(Config{URL: notify.SecretURL(srv.URL), Format: format}, notify.NotifierOptions{Name: "hook"})
			if err != nil {
				t.Fatal(err)
			}
			log := notify.NewMemoryLog(10 * storm)
			d, err := notify.NewDispatcher([]notify.Channel{{Name: "hook", Notifier: hook, RatePerMinute: 1, QueueSize: storm, Tenants: []string{notify.AllTenants}}},
				notify.Options{Clock: clk, Log: log, Location: time.UTC})
			if err != nil {
				t.Fatal(err)
			}
			d.Start(t.Context())
			defer d.Stop(context.Background())
			names := make([]string, 10)
			for i := range names {
				names[i] = fmt.Sprintf("nightly_warehouse_reload_%02d_partition_shard_with_a_long_descriptive_name", i)
			}
			note := func(i int) apollo.Notification {
				m := message(apollo.NotifyStorm, fmt.Sprintf("storm-%04d", i), fmt.Sprintf("batch_%04d_", i)).Notification
				m.Alert.Tenant = []string{"acme", "globex"}[i%2]
				m.Alert.TopNames, m.Alert.Count = names, 300
				m.Alert.Summary = fmt.Sprintf("%d runs of batch_%04d_* failed within a minute", 300, i)
				return m
			}
			d.Send(note(0)) // takes the minute's turn
			<-got
			for i := 1; i <= storm; i++ {
				d.Send(note(i)) // folded while the lane waits for its turn
			}
			// Every one is in the lane's batch, and the lane waits for its turn.
			deadline := time.Now().Add(testwait.Timeout(t))
			for d.Stats().Channels["hook"].QueueLen > 0 {
				if time.Now().After(deadline) {
					t.Fatal("the lane never took the storm into its batch")
				}
				runtime.Gosched()
			}
			// Each turn, one digest of what one body lists in full; the
			// rest wait for the next turns, until every one has gone.
			seen := map[string]bool{}
			for digests := 1; len(seen) < storm; digests++ {
				body := nextDigest(t, clk, got, refused, log)
				var groups []string
				var total, omitted int
				if format == FormatAlertmanager {
					var p AMPayload
					if err := json.Unmarshal(body, &p); err != nil {
						t.Fatal(err)
					}
					for _, a := range p.Alerts {
						groups = append(groups, a.Labels["group"])
					}
					total, omitted = len(p.Alerts)+p.TruncatedAlerts, p.TruncatedAlerts
				} else {
					var p ApolloPayload
					if err := json.Unmarshal(body, &p); err != nil {
						t.Fatal(err)
					}
					for _, n := range p.Notifications {
						groups = append(groups, n.Alert.Group)
					}
					if len(groups) == 0 { // the last may be one alone
						groups = append(groups, p.Alert.Group)
					}
					total, omitted = max(p.Total, 1), p.Omitted
				}
				if omitted != 0 || total != len(groups) || total >= storm || (digests == 1 && groups[0] != "batch_0001_") {
					t.Fatalf("digest %d (%d bytes): %d listed from %q, %d omitted, total %d", digests, len(body), len(groups), groups[0], omitted, total)
				}
				for _, g := range groups {
					if seen[g] {
						t.Fatalf("%s sent twice", g)
					}
					seen[g] = true
				}
				// The lane took the rest into its next batch.
				for d.Stats().Channels["hook"].QueueLen > 0 {
					if time.Now().After(deadline) {
						t.Fatal("the lane never took the rest into its batch")
					}
					runtime.Gosched()
				}
			}
		})
	}
}

// nextDigest lets the lane's turn come, waiting for it to wait first, and
// returns the body the receiver got.
func nextDigest(t *testing.T, clk *apollo.FakeClock, got chan []byte, refused chan struct{}, log notify.AttemptLog) []byte {
	t.Helper()
	if !clk.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("the lane does not wait for its turn")
	}
	clk.Advance(time.Minute)
	select {
	case body := <-got:
		return body
	case <-refused:
		t.Fatal("the receiver refused the digest: over 1 MiB")
	case <-time.After(testwait.Timeout(t)):
		t.Fatalf("the digest never arrived: %+v", log.List(notify.AttemptFilter{}))
	}
	return nil
}

// A body past 1 MiB is not sent: a template that writes more for one
// notification (here its 400 000-byte summary, three times) fails with an
// error that names the channel, the template and the limit, recorded
// as failed (not retried: it would be as large next time) in each
// tenant's own record and counted; the receiver is never called with
// it, and another channel that both tenants' notifications name still
// delivers them. Rendering stops at the limit, so the body never takes
// more memory than that; a template that writes more than that for a
// sample message is refused at start-up. Before, the body was posted whole, whatever
// its size: a receiver behind nginx refused it with a bare 413.
func TestBodyOverOneMiBIsNotSent(t *testing.T) {
	t.Parallel()
	bodies := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- r.URL.Path + " " + fmt.Sprint(len(b))
	}))
	t.Cleanup(srv.Close)
	// One that writes more for the sample message is refused at start-up.
	_, err := New(Config{URL: notify.SecretURL(srv.URL), Template: `{{printf "%0999999d" 0}}{{printf "%0999999d" 0}}`}, notify.NotifierOptions{Name: "sms"})
	if err == nil || !strings.Contains(err.Error(), "the body the template writes for a sample message is over 1 MiB") {
		t.Fatalf("New: %v, want the template refused: over 1 MiB for a sample", err)
	}
	big, err := New(Config{URL: notify.SecretURL(srv.URL + "/sms"), Template: `{{.Title}} {{.Notification.Alert.Summary}}{{.Notification.Alert.Summary}}{{.Notification.Alert.Summary}}`},
		notify.NotifierOptions{Name: "sms"})
	if err != nil {
		t.Fatal(err)
	}
	std, err := New(Config{URL: notify.SecretURL(srv.URL + "/hook")}, notify.NotifierOptions{Name: "hook"})
	if err != nil {
		t.Fatal(err)
	}
	log := notify.NewMemoryLog(100)
	d, err := notify.NewDispatcher([]notify.Channel{
		{Name: "sms", Notifier: big, Tenants: []string{notify.AllTenants}},
		{Name: "hook", Notifier: std, Tenants: []string{notify.AllTenants}},
	}, notify.Options{Log: log, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(t.Context())
	defer d.Stop(context.Background())
	for _, tenant := range []string{"acme", "globex"} {
		n := message(apollo.NotifyFiring, "a-"+tenant, "batch_").Notification
		n.Alert.Tenant, n.Channels = tenant, []string{"sms", "hook"}
		n.Alert.Summary = strings.Repeat("x", 400000)
		d.Send(n)
	}
	for range 2 {
		select {
		case b := <-bodies:
			if !strings.HasPrefix(b, "/hook ") {
				t.Fatalf("the receiver got %s: a body over 1 MiB was sent", b)
			}
		case <-time.After(testwait.Timeout(t)):
			t.Fatal("the standard webhook did not deliver")
		}
	}
	deadline := time.Now().Add(testwait.Timeout(t))
	for d.Stats().Channels["sms"].Failed < 2 || d.Stats().Channels["hook"].Sent < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", d.Stats().Channels)
		}
		runtime.Gosched()
	}
	for _, tenant := range []string{"acme", "globex"} {
		as := log.List(notify.AttemptFilter{Tenant: tenant, Channel: "sms"})
		want := "webhook: channel sms: the body its template writes is over 1 MiB (1048576 bytes), the most a webhook is sent: not sent; have it write less for each notification"
		if len(as) != 1 || as[0].Outcome != notify.OutcomeFailed || as[0].Error != want || as[0].AlertID != "a-"+tenant {
			t.Errorf("%s's record of sms: %+v, want one failed: %s", tenant, as, want)
		}
	}
	select {
	case b := <-bodies:
		t.Fatalf("the receiver got %s", b)
	default:
	}
}

// A rule's LABELS are not bounded in size (rules.Parse takes a value of
// megabytes), and every notification of the rule carries them: in the
// standard bodies, over 1 MiB, the notification is not sent, and the
// error says why and what to do; nothing reaches the receiver.
func TestHugeLabelsOverOneMiBAreNotSent(t *testing.T) {
	t.Parallel()
	called := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called <- struct{}{} }))
	t.Cleanup(srv.Close)
	for _, format := range []string{FormatApollo, FormatAlertmanager} {
		hook, err := New(Config{URL: notify.SecretURL(srv.URL), Format: format}, notify.NotifierOptions{Name: "ops"})
		if err != nil {
			t.Fatal(err)
		}
		m := message(apollo.NotifyFiring, "a1", "batch_")
		m.Notification.Alert.Labels = map[string]string{"note": strings.Repeat("x", 1100<<10)}
		retry, err := hook.Notify(t.Context(), m)
		want := "webhook: channel ops: the " + format + " body of this alert is over 1 MiB (1048576 bytes), the most a webhook is sent: not sent; a rule's LABELS make most of it: keep their values short"
		if retry || err == nil || err.Error() != want {
			t.Errorf("%s: retry %v, %v; want not retried: %s", format, retry, err, want)
		}
	}
	select {
	case <-called:
		t.Fatal("the receiver was sent a body over 1 MiB")
	default:
	}
}
