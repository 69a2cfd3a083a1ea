package wecom

import (
	"strings"
	"testing"

	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/notifytest"
)

func message() *notify.Message {
	return &notify.Message{Title: "[FIRING] batch_failures", Text: "failed_rate 0.2", Markdown: "### [FIRING] batch_failures\nfailed_rate 0.2"}
}

const target = "/cgi-bin/webhook/send?key=k3y-693a91f6"

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
			robot := notifytest.Endpoint{Target: target, Answer: notifytest.Reply(200, `{"errcode":0,"errmsg":"ok"}`)}
			r := robot.Receive(t, func(u string) (notify.Notifier, error) {
				cfg := tc.cfg
				cfg.URL = notify.SecretURL(u)
				return New(cfg, notify.NotifierOptions{})
			}, message())
			if r.Body != tc.want {
				t.Fatalf("payload\n got %s\nwant %s", r.Body, tc.want)
			}
		})
	}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	notifytest.CheckFailures(t, target, "k3y", func(u string) (notify.Notifier, error) {
		return New(Config{URL: notify.SecretURL(u)}, notify.NotifierOptions{})
	}, message(), []notifytest.Failure{
		{Name: "rate limited", Status: 200, Answer: `{"errcode":45009,"errmsg":"api freq out of limit"}`, Retryable: true, ErrPart: "errcode 45009"},
		{Name: "bad key", Status: 200, Answer: `{"errcode":93000,"errmsg":"invalid webhook url"}`, Retryable: false, ErrPart: "errcode 93000"},
		{Name: "too long", Status: 200, Answer: `{"errcode":40058,"errmsg":"markdown.content exceed max length 4096"}`, Retryable: false, ErrPart: "40058"},
		{Name: "bad gateway", Status: 502, Answer: ``, Retryable: true, ErrPart: "502"},
	})
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
		{"@all in markdown", Config{URL: u, MentionedList: []string{"zhangsan", "@all"}}, `mentioned_list: WeCom markdown messages cannot mention everyone ("@all") (set msgtype: text`},
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

// A markdown message too long for WeCom (4096 bytes: a digest of twenty
// long job names) is cut before the mentions, not through them: the people
// on call are pinged in a storm too.
func TestMentionsSurviveTheCut(t *testing.T) {
	t.Parallel()
	n, err := New(Config{URL: "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=x", MentionedList: []string{"zhangsan", "lisi"}}, notify.NotifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := n.payload(&notify.Message{Markdown: strings.Repeat("- [FIRING critical] 告警 batch_\n", 300)})
	if c := p.Markdown.Content; len(c) > maxMarkdown || !strings.Contains(c, "…") || !strings.HasSuffix(c, " <@zhangsan> <@lisi>") {
		t.Fatalf("%d bytes (limit %d), ending …%s", len(c), maxMarkdown, c[max(0, len(c)-60):])
	}
}
