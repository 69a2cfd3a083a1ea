package slack

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/notify"
)

const hookPath = "/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"

func newHook(t *testing.T, status int, answer string) (chan string, string) {
	bodies := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != hookPath || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Errorf("request %s %s %s", r.Method, r.URL, r.Header.Get("Content-Type"))
		}
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return bodies, srv.URL + hookPath
}

func TestPayload(t *testing.T) {
	t.Parallel()
	bodies, u := newHook(t, 200, "ok")
	n, err := New(Config{URL: notify.SecretURL(u)}, notify.NotifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := &notify.Message{Title: "[FIRING] rate > 0.05",
		Markdown: "### [FIRING] rate > 0.05\nfailed_rate **0.2** > 0.05\n\n- **Group:** batch_\n\n[Open in Apollo-11](https://apollo.example.com/alerts/a1)"}
	if retry, err := n.Notify(context.Background(), m); err != nil || retry {
		t.Fatalf("%v %v", retry, err)
	}
	want := `{"text":"[FIRING] rate &gt; 0.05","blocks":[{"type":"header","text":{"type":"plain_text","text":"[FIRING] rate > 0.05"}},{"type":"section","text":{"type":"mrkdwn","text":"failed_rate *0.2* &gt; 0.05\n\n• *Group:* batch_\n\n<https://apollo.example.com/alerts/a1|Open in Apollo-11>"}}]}`
	if got := <-bodies; got != want {
		t.Fatalf("payload\n got %s\nwant %s", got, want)
	}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    int
		answer    string
		retryable bool
	}{{429, "rate_limited", true}, {500, "", true}, {400, "invalid_payload", false}, {404, "no_service", false}, {410, "channel_is_archived", false}} {
		_, u := newHook(t, tc.status, tc.answer)
		n, _ := New(Config{URL: notify.SecretURL(u)}, notify.NotifierOptions{})
		retry, err := n.Notify(context.Background(), &notify.Message{Title: "x"})
		if err == nil || retry != tc.retryable || !strings.Contains(err.Error(), tc.answer) || strings.Contains(err.Error(), "XXXXXXXX") {
			t.Errorf("%d: retryable %v, err %v", tc.status, retry, err)
		}
	}
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
