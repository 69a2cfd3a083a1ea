package feishu

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/notifytest"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

const hookPath = "/open-apis/bot/v2/hook/5e3d587e-d78e-4a07-bd07-265f269f86fd"

func message() *notify.Message {
	return &notify.Message{
		Notification: apollo.Notification{Kind: apollo.NotifyFiring, Alert: apollo.Alert{Severity: apollo.SeverityCritical}},
		Title:        "[FIRING] batch_failures", Text: "failed_rate 0.2",
		Markdown: "### [FIRING] batch_failures\nfailed_rate 0.2\n## Jobs\n- **batch_a**",
	}
}

// bot is a fake Feishu bot that checks the signature the way Feishu
// documents it, refusing a bad one with code 19021 as Feishu does, and
// otherwise answers as told.
func bot(t *testing.T, secret, answer string) notifytest.Endpoint {
	return notifytest.Endpoint{Target: hookPath, Answer: func(r notifytest.Request) (int, string) {
		var p struct{ Timestamp, Sign string }
		if err := json.Unmarshal([]byte(r.Body), &p); err != nil {
			t.Errorf("body %s: %v", r.Body, err)
		}
		if secret == "" {
			return 200, answer
		}
		if p.Timestamp != strconv.FormatInt(t0.Unix(), 10) {
			t.Errorf("timestamp %q, want the clock's seconds", p.Timestamp)
		}
		mac := hmac.New(sha256.New, []byte(p.Timestamp+"\n"+secret))
		if want := base64.StdEncoding.EncodeToString(mac.Sum(nil)); p.Sign != want {
			return 200, `{"code":19021,"msg":"sign match fail or timestamp is not within one hour from current time"}`
		}
		return 200, answer
	}}
}

func TestPayloadAndSignature(t *testing.T) {
	t.Parallel()
	ts := strconv.FormatInt(t0.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(ts+"\ns3cr3t"))
	sig := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, tc := range []struct {
		name, secret string
		cfg          Config
		want         string
	}{
		{"signed card", "s3cr3t", Config{},
			`{"timestamp":"` + ts + `","sign":"` + sig + `","msg_type":"interactive","card":{"config":{"wide_screen_mode":true},"header":{"title":{"tag":"plain_text","content":"[FIRING] batch_failures"},"template":"red"},"elements":[{"tag":"markdown","content":"failed_rate 0.2\n**Jobs**\n- **batch_a**"}]}}`},
		{"text", "", Config{MsgType: "text"},
			`{"msg_type":"text","content":{"text":"[FIRING] batch_failures\n\nfailed_rate 0.2"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bot(t, tc.secret, `{"code":0,"msg":"success","data":{}}`).Receive(t, func(u string) (notify.Notifier, error) {
				cfg := tc.cfg
				cfg.URL, cfg.Secret = notify.SecretURL(u), notify.Secret(tc.secret)
				return New(cfg, notify.NotifierOptions{Clock: apollo.NewFakeClock(t0)})
			}, message())
			if r.Body != tc.want {
				t.Fatalf("payload\n got %s\nwant %s", r.Body, tc.want)
			}
		})
	}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	notifytest.CheckFailures(t, hookPath, "5e3d587e", func(u string) (notify.Notifier, error) {
		return New(Config{URL: notify.SecretURL(u)}, notify.NotifierOptions{})
	}, message(), []notifytest.Failure{
		{Name: "too frequent", Status: 200, Answer: `{"code":11232,"msg":"frequency limited"}`, Retryable: true, ErrPart: "code 11232"},
		{Name: "keyword", Status: 200, Answer: `{"code":19024,"msg":"Key Words Not Found"}`, ErrPart: "code 19024"},
		{Name: "old shape", Status: 200, Answer: `{"StatusCode":9499,"StatusMessage":"Bad Request"}`, ErrPart: "code 9499: Bad Request"},
	})
	// The old shape with success is success.
	u, _ := bot(t, "", `{"StatusCode":0,"StatusMessage":"success"}`).Start(t)
	n, _ := New(Config{URL: notify.SecretURL(u)}, notify.NotifierOptions{})
	if _, err := n.Notify(context.Background(), message()); err != nil {
		t.Fatal(err)
	}
}

// A wrong secret is caught by the bot's check: the fake bot verifies
// independently and refuses, and the notifier reports it as permanent.
func TestWrongSecretIsRefused(t *testing.T) {
	t.Parallel()
	u, _ := bot(t, "right", `{"code":0}`).Start(t)
	n, _ := New(Config{URL: notify.SecretURL(u), Secret: "wrong"}, notify.NotifierOptions{Clock: apollo.NewFakeClock(t0)})
	retry, err := n.Notify(context.Background(), message())
	if err == nil || retry || !strings.Contains(err.Error(), "19021") {
		t.Fatalf("%v %v", retry, err)
	}
}

func TestColor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind apollo.NotificationKind
		sev  apollo.Severity
		want string
	}{{"firing", "critical", "red"}, {"repeat", "warning", "orange"}, {"storm", "info", "blue"}, {"resolved", "critical", "green"}, {notify.KindDigest, "", "indigo"}} {
		m := &notify.Message{Notification: apollo.Notification{Kind: tc.kind, Alert: apollo.Alert{Severity: tc.sev}}}
		if got := color(m); got != tc.want {
			t.Errorf("%s/%s: %s, want %s", tc.kind, tc.sev, got, tc.want)
		}
	}
}

func TestCardMarkdown(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"### Title\nbody":              "body",
		"intro\n## Section\n- a":       "intro\n**Section**\n- a",
		"#hashtag is not a heading":    "#hashtag is not a heading",
		"    # indented code":          "    # indented code",
		"### T\n\n#\n####### seven #s": "####### seven #s",
	} {
		if got := cardMarkdown(in); got != want {
			t.Errorf("cardMarkdown(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzCardMarkdown(f *testing.F) {
	f.Add("### [FIRING] x\nbody\n## h\n- **a**")
	f.Add("#\n##\n   ### x ###")
	f.Add("")
	f.Fuzz(func(t *testing.T, md string) {
		got := cardMarkdown(md)
		if len(got) > 2*len(md)+4 {
			t.Fatalf("grew from %d to %d bytes", len(md), len(got))
		}
		// No line of the output is a heading any more.
		for _, l := range strings.Split(got, "\n") {
			if _, ok := notify.MarkdownHeading(l); ok {
				t.Fatalf("heading left in %q: %q", got, l)
			}
		}
	})
}
