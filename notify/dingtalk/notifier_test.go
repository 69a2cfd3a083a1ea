package dingtalk

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func message() *notify.Message {
	return &notify.Message{Title: "[FIRING] batch_failures", Markdown: "### [FIRING] batch_failures\n- **Group:** batch_"}
}

// robot is a fake DingTalk robot: it checks the token and, when secret is
// set, the signature, then answers with the code the test chose.
type robot struct {
	t      *testing.T
	secret string
	now    time.Time
	answer string
	status int
	bodies chan string
}

func (r *robot) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	if req.Method != http.MethodPost || req.URL.Path != "/robot/send" || q.Get("access_token") != "tok3n" {
		r.t.Errorf("request %s %s", req.Method, req.URL)
	}
	if ct := req.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		r.t.Errorf("content type %q", ct)
	}
	if r.secret != "" {
		ts := q.Get("timestamp")
		if ts != strconv.FormatInt(r.now.UnixMilli(), 10) {
			r.t.Errorf("timestamp %q, want the clock's milliseconds", ts)
		}
		mac := hmac.New(sha256.New, []byte(r.secret))
		mac.Write([]byte(ts + "\n" + r.secret))
		if want := base64.StdEncoding.EncodeToString(mac.Sum(nil)); q.Get("sign") != want {
			r.t.Errorf("sign %q, want %q", q.Get("sign"), want)
		}
	} else if q.Has("sign") || q.Has("timestamp") {
		r.t.Errorf("unsigned robot got %s", req.URL.RawQuery)
	}
	b, _ := io.ReadAll(req.Body)
	r.bodies <- string(b)
	w.WriteHeader(r.status)
	io.WriteString(w, r.answer)
}

func newRobot(t *testing.T, secret, answer string, status int) (*robot, string) {
	r := &robot{t: t, secret: secret, now: t0, answer: answer, status: status, bodies: make(chan string, 10)}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL + "/robot/send?access_token=tok3n"
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
			r, u := newRobot(t, tc.secret, `{"errcode":0,"errmsg":"ok"}`, 200)
			cfg := tc.cfg
			cfg.URL, cfg.Secret = notify.SecretURL(u), notify.Secret(tc.secret)
			n, err := New(cfg, notify.NotifierOptions{Clock: apollo.NewFakeClock(t0)})
			if err != nil {
				t.Fatal(err)
			}
			if retry, err := n.Notify(context.Background(), message()); err != nil || retry {
				t.Fatalf("%v %v", retry, err)
			}
			if got := <-r.bodies; got != tc.want {
				t.Fatalf("payload\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		status    int
		answer    string
		retryable bool
		errPart   string
	}{
		{"too fast", 200, `{"errcode":130101,"errmsg":"send too fast, exceed 20 times per minute"}`, true, "errcode 130101"},
		{"busy", 200, `{"errcode":-1,"errmsg":"系统繁忙"}`, true, "errcode -1"},
		{"keyword", 200, `{"errcode":310000,"errmsg":"keywords not in content"}`, false, "errcode 310000: keywords"},
		{"token", 200, `{"errcode":300001,"errmsg":"token is not exist"}`, false, "errcode 300001"},
		{"server error", 500, `oops`, true, "500 Internal Server Error"},
		{"not found", 404, `{}`, false, "404"},
		{"not json", 200, `<html>`, true, "unreadable answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, u := newRobot(t, "", tc.answer, tc.status)
			n, err := New(Config{URL: notify.SecretURL(u)}, notify.NotifierOptions{})
			if err != nil {
				t.Fatal(err)
			}
			retry, err := n.Notify(context.Background(), message())
			if err == nil || retry != tc.retryable || !strings.Contains(err.Error(), tc.errPart) {
				t.Fatalf("retryable %v, err %v", retry, err)
			}
			if strings.Contains(err.Error(), "tok3n") {
				t.Fatalf("token in error: %v", err)
			}
		})
	}
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
