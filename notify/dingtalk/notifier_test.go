package dingtalk

import (
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

func message() *notify.Message {
	return &notify.Message{Title: "[FIRING] batch_failures", Markdown: "### [FIRING] batch_failures\n- **Group:** batch_"}
}

const target = "/robot/send?access_token=tok3n"

// checkSigned fails the test unless a request to a robot with secret is
// signed as DingTalk documents it, or, without a secret, not signed.
func checkSigned(t *testing.T, secret string, r notifytest.Request) {
	t.Helper()
	q := r.Query
	if secret == "" {
		if q.Has("sign") || q.Has("timestamp") {
			t.Errorf("unsigned robot got %s", q.Encode())
		}
		return
	}
	ts := q.Get("timestamp")
	if ts != strconv.FormatInt(t0.UnixMilli(), 10) {
		t.Errorf("timestamp %q, want the clock's milliseconds", ts)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "\n" + secret))
	if want := base64.StdEncoding.EncodeToString(mac.Sum(nil)); q.Get("sign") != want {
		t.Errorf("sign %q, want %q", q.Get("sign"), want)
	}
}

func TestPayloadAndSignature(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		secret string
		cfg    Config
		want   string
	}{
		{name: "signed, mentions", secret: "SECs3cr3t", cfg: Config{AtMobiles: []string{"13800000000", "13900000000"}},
			want: `{"msgtype":"markdown","markdown":{"title":"[FIRING] batch_failures","text":"### [FIRING] batch_failures\n- **Group:** batch_\n\n@13800000000 @13900000000"},"at":{"atMobiles":["13800000000","13900000000"],"isAtAll":false}}`},
		{name: "plain, everyone", cfg: Config{AtAll: true},
			want: `{"msgtype":"markdown","markdown":{"title":"[FIRING] batch_failures","text":"### [FIRING] batch_failures\n- **Group:** batch_"},"at":{"isAtAll":true}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			robot := notifytest.Endpoint{Target: target, ContentType: "application/json", Answer: notifytest.Reply(200, `{"errcode":0,"errmsg":"ok"}`)}
			r := robot.Receive(t, func(u string) (notify.Notifier, error) {
				cfg := tc.cfg
				cfg.URL, cfg.Secret = notify.SecretURL(u), notify.Secret(tc.secret)
				return New(cfg, notify.NotifierOptions{Clock: apollo.NewFakeClock(t0)})
			}, message())
			checkSigned(t, tc.secret, r)
			if r.Body != tc.want {
				t.Fatalf("payload\n got %s\nwant %s", r.Body, tc.want)
			}
		})
	}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	notifytest.CheckFailures(t, target, "tok3n", func(u string) (notify.Notifier, error) {
		return New(Config{URL: notify.SecretURL(u)}, notify.NotifierOptions{})
	}, message(), []notifytest.Failure{
		{Name: "too fast", Status: 200, Answer: `{"errcode":130101,"errmsg":"send too fast, exceed 20 times per minute"}`, Retryable: true, ErrPart: "errcode 130101"},
		{Name: "busy", Status: 200, Answer: `{"errcode":-1,"errmsg":"系统繁忙"}`, Retryable: true, ErrPart: "errcode -1"},
		{Name: "keyword", Status: 200, Answer: `{"errcode":310000,"errmsg":"keywords not in content"}`, ErrPart: "errcode 310000: keywords"},
		{Name: "token", Status: 200, Answer: `{"errcode":300001,"errmsg":"token is not exist"}`, ErrPart: "errcode 300001"},
		{Name: "server error", Status: 500, Answer: `oops`, Retryable: true, ErrPart: "500 Internal Server Error"},
		{Name: "not found", Status: 404, Answer: `{}`, ErrPart: "404"},
		{Name: "not json", Status: 200, Answer: `<html>`, Retryable: true, ErrPart: "unreadable answer"},
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no url", Config{}, "url: missing webhook URL"},
		{"not http", Config{URL: "ftp://x/robot?access_token=tok3n"}, "url: ftp://x/robot?access_token=REDACTED is not"},
		{"secret", Config{URL: "https://oapi.dingtalk.com/robot/send?access_token=x", Secret: "tok3n"}, "secret: a DingTalk signing secret starts with SEC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, notify.NotifierOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "tok3n") {
				t.Fatalf("%v", err)
			}
		})
	}
}

// The payload must stay valid JSON whatever the markdown holds.
func TestPayloadIsJSON(t *testing.T) {
	t.Parallel()
	n, _ := New(Config{URL: "https://oapi.dingtalk.com/robot/send?access_token=x"}, notify.NotifierOptions{})
	b, err := json.Marshal(n.payload(&notify.Message{Title: "\"<>&\u2028", Markdown: strings.Repeat("告", 10000)}))
	if err != nil || !json.Valid(b) || len(b) > 2*maxText {
		t.Fatalf("%v %d", err, len(b))
	}
}

// A message too long for DingTalk is cut before the mentions, not through
// them: DingTalk pings a member of at_mobiles only when the text names
// them, and a storm's digest is when the people on call must be pinged.
func TestMentionsSurviveTheCut(t *testing.T) {
	t.Parallel()
	mobiles := []string{"13800000000", "13900000000"}
	n, err := New(Config{URL: "https://oapi.dingtalk.com/robot/send?access_token=x", AtMobiles: mobiles}, notify.NotifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := n.payload(&notify.Message{Title: "25 notifications", Markdown: strings.Repeat("- [FIRING critical] 告警 batch_\n", 2000)})
	if len(p.Markdown.Text) > maxText || !strings.Contains(p.Markdown.Text, "…") {
		t.Fatalf("%d bytes, over %d or not marked as cut", len(p.Markdown.Text), maxText)
	}
	if !strings.HasSuffix(p.Markdown.Text, "@13800000000 @13900000000") {
		t.Fatalf("the mentions were cut off: …%s", p.Markdown.Text[len(p.Markdown.Text)-80:])
	}
}
