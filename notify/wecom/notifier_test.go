package wecom

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/notify"
)

func message() *notify.Message {
	return &notify.Message{Title: "[FIRING] batch_failures", Text: "failed_rate 0.2", Markdown: "### [FIRING] batch_failures\nfailed_rate 0.2"}
}

func newRobot(t *testing.T, answer string, status int) (chan string, string) {
	bodies := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/cgi-bin/webhook/send" || r.URL.Query().Get("key") != "k3y-693a91f6" {
			t.Errorf("request %s %s", r.Method, r.URL)
		}
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return bodies, srv.URL + "/cgi-bin/webhook/send?key=k3y-693a91f6"
}

func TestPayload(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"markdown", Config{MentionedList: []string{"zhangsan"}},
			`{"msgtype":"markdown","markdown":{"content":"### [FIRING] batch_failures\nfailed_rate 0.2 <@zhangsan>"}}`},
		{"text with mentions", Config{MsgType: "text", MentionedList: []string{"@all"}, MentionedMobileList: []string{"13800000000"}},
			`{"msgtype":"text","text":{"content":"[FIRING] batch_failures\n\nfailed_rate 0.2","mentioned_list":["@all"],"mentioned_mobile_list":["13800000000"]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bodies, u := newRobot(t, `{"errcode":0,"errmsg":"ok"}`, 200)
			cfg := tc.cfg
			cfg.URL = notify.SecretURL(u)
			n, err := New(cfg, notify.NotifierOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if retry, err := n.Notify(context.Background(), message()); err != nil || retry {
				t.Fatalf("%v %v", retry, err)
			}
			if got := <-bodies; got != tc.want {
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
		{"rate limited", 200, `{"errcode":45009,"errmsg":"api freq out of limit"}`, true, "errcode 45009"},
		{"bad key", 200, `{"errcode":93000,"errmsg":"invalid webhook url"}`, false, "errcode 93000"},
		{"too long", 200, `{"errcode":40058,"errmsg":"markdown.content exceed max length 4096"}`, false, "40058"},
		{"bad gateway", 502, ``, true, "502"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, u := newRobot(t, tc.answer, tc.status)
			n, err := New(Config{URL: notify.SecretURL(u)}, notify.NotifierOptions{})
			if err != nil {
				t.Fatal(err)
			}
			retry, err := n.Notify(context.Background(), message())
			if err == nil || retry != tc.retryable || !strings.Contains(err.Error(), tc.errPart) || strings.Contains(err.Error(), "k3y") {
				t.Fatalf("retryable %v, err %v", retry, err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	const u = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=x"
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no url", Config{}, "url: missing"},
		{"mobiles in markdown", Config{URL: u, MentionedMobileList: []string{"1"}}, "mentioned_mobile_list: WeCom markdown messages cannot mention by phone number (set msgtype: text"},
		{"msgtype", Config{URL: u, MsgType: "news"}, "msgtype: unknown message type news"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg, notify.NotifierOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v", err)
			}
		})
	}
}

func TestLongMarkdownIsCut(t *testing.T) {
	t.Parallel()
	n, _ := New(Config{URL: "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=x"}, notify.NotifierOptions{})
	p := n.payload(&notify.Message{Markdown: strings.Repeat("告警", 3000)})
	if len(p.Markdown.Content) > maxMarkdown || !strings.HasSuffix(p.Markdown.Content, "…") {
		t.Fatalf("%d bytes", len(p.Markdown.Content))
	}
}
