package slack

import (
	"regexp"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/notifytest"
)

const hookPath = "/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"

func newNotifier(u string) (notify.Notifier, error) {
	return New(Config{URL: notify.SecretURL(u)}, notify.NotifierOptions{})
}

func TestPayload(t *testing.T) {
	t.Parallel()
	hook := notifytest.Endpoint{Target: hookPath, ContentType: "application/json", Answer: notifytest.Reply(200, "ok")}
	r := hook.Receive(t, newNotifier, &notify.Message{Title: "[FIRING] rate > 0.05",
		Markdown: "### [FIRING] rate > 0.05\nfailed_rate **0.2** > 0.05\n\n- **Group:** batch_\n\n[Open in Apollo-11](https://apollo.example.com/alerts/a1)"})
	want := `{"text":"[FIRING] rate &gt; 0.05","blocks":[{"type":"header","text":{"type":"plain_text","text":"[FIRING] rate > 0.05"}},{"type":"section","text":{"type":"mrkdwn","text":"failed_rate *0.2* &gt; 0.05\n\n• *Group:* batch_\n\n<https://apollo.example.com/alerts/a1|Open in Apollo-11>"}}]}`
	if r.Body != want {
		t.Fatalf("payload\n got %s\nwant %s", r.Body, want)
	}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	notifytest.CheckFailures(t, hookPath, "XXXXXXXX", newNotifier, &notify.Message{Title: "x"}, []notifytest.Failure{
		{Name: "rate limited", Status: 429, Answer: "rate_limited", Retryable: true, ErrPart: "rate_limited"},
		{Name: "server error", Status: 500, Retryable: true},
		{Name: "bad payload", Status: 400, Answer: "invalid_payload", ErrPart: "invalid_payload"},
		{Name: "no service", Status: 404, Answer: "no_service", ErrPart: "no_service"},
		{Name: "archived", Status: 410, Answer: "channel_is_archived", ErrPart: "channel_is_archived"},
	})
}

func TestMrkdwn(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text":                   "plain text",
		"### Title\nbody":              "body",
		"## Sub":                       "",
		"x\n## Sub\n- a & b <c>":       "x\n*Sub*\n• a &amp; b &lt;c&gt;",
		"[a](http://x/?q=1&r=2|3) [b]": "<http://x/?q=1&amp;r=2%7C3|a> [b]",
		"[not a link](has space)":      "[not a link](has space)",
		"**bold** and **more**":        "*bold* and *more*",
		"告警 **严重**":                    "告警 *严重*",
	} {
		if got := mrkdwn(in); got != want {
			t.Errorf("mrkdwn(%q)\n got %q\nwant %q", in, got, want)
		}
	}
}

var ourLinks = regexp.MustCompile(`<[^<>|]*\|[^<>]*>`)

// FuzzMrkdwn: the only < and > left are the links mrkdwn made, text
// without markdown passes unchanged, and nothing panics.
func FuzzMrkdwn(f *testing.F) {
	f.Add("### [FIRING] x\n- **Rule:** r\n[Open](https://a/b?c=d&e=f)")
	f.Add("[[a](b)](c) ** <@U123> &amp;")
	f.Add("[x](")
	f.Fuzz(func(t *testing.T, md string) {
		got := mrkdwn(md)
		if rest := ourLinks.ReplaceAllString(got, ""); strings.ContainsAny(rest, "<>") {
			t.Fatalf("mrkdwn(%q) = %q leaves raw < or >", md, got)
		}
		if !strings.ContainsAny(md, "*[]&<>#-") && got != strings.Trim(md, "\n") {
			t.Fatalf("plain %q changed to %q", md, got)
		}
	})
}
