package channels

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify/notifytest"
)

// A 1 MiB summary and the longest job name a reporter may send, made of
// what grows when a message is made inert (full-width forms take three
// bytes) and when it is written as JSON (a quote or a backslash takes
// two), reach every robot within the size its platform takes: a message
// over it is refused, and the alert is never seen.
func TestHugeTextFitsEveryPlatformLimit(t *testing.T) {
	t.Parallel()
	str := func(t *testing.T, body []byte, path ...string) string {
		t.Helper()
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("body: %v", err)
		}
		for _, p := range path {
			switch x := v.(type) {
			case map[string]any:
				v = x[p]
			case []any:
				v = x[0]
			}
		}
		s, _ := v.(string)
		return s
	}
	for _, tc := range []struct {
		typ, yaml, answer string
		check             func(t *testing.T, body []byte)
	}{
		{typ: "dingtalk", answer: `{"errcode":0}`, check: func(t *testing.T, body []byte) {
			// DingTalk takes a message of up to 20 000 bytes.
			if n := len(str(t, body, "markdown", "title")) + len(str(t, body, "markdown", "text")); n > 20000 {
				t.Errorf("markdown title and text of %d bytes, over DingTalk's 20000", n)
			}
		}},
		{typ: "wecom", answer: `{"errcode":0}`, check: func(t *testing.T, body []byte) {
			if n := len(str(t, body, "markdown", "content")); n > 4096 {
				t.Errorf("markdown of %d bytes, over WeCom's 4096", n)
			}
		}},
		{typ: "wecom", yaml: "msgtype: text", answer: `{"errcode":0}`, check: func(t *testing.T, body []byte) {
			if n := len(str(t, body, "text", "content")); n > 2048 {
				t.Errorf("text of %d bytes, over WeCom's 2048", n)
			}
		}},
		{typ: "feishu", answer: `{"code":0}`, check: func(t *testing.T, body []byte) {
			// Feishu refuses a request body over 20 KB.
			if len(body) > 20000 {
				t.Errorf("request body of %d bytes, over Feishu's 20 KB", len(body))
			}
		}},
		{typ: "feishu", yaml: "msg_type: text", answer: `{"code":0}`, check: func(t *testing.T, body []byte) {
			if len(body) > 20000 {
				t.Errorf("request body of %d bytes, over Feishu's 20 KB", len(body))
			}
		}},
		{typ: "slack", answer: "ok", check: func(t *testing.T, body []byte) {
			// Slack refuses a header over 150 characters and a section over
			// 3000 (invalid_blocks).
			if n := utf8.RuneCountInString(str(t, body, "blocks", "0", "text", "text")); n > 150 {
				t.Errorf("header of %d characters, over Slack's 150", n)
			}
			var p struct {
				Blocks []struct{ Text struct{ Text string } }
			}
			if err := json.Unmarshal(body, &p); err != nil || len(p.Blocks) < 2 {
				t.Fatalf("blocks: %v %s", err, body[:200])
			}
			if n := utf8.RuneCountInString(p.Blocks[1].Text.Text); n > 3000 {
				t.Errorf("section of %d characters, over Slack's 3000", n)
			}
		}},
	} {
		// A title template over the summary makes the title as long.
		for _, title := range []string{"", "templates:\n  firing: '{{define \"title\"}}{{.Alert.Summary}}{{end}}'\n"} {
			t.Run(tc.typ+" "+tc.yaml+" "+title, func(t *testing.T) {
				t.Parallel()
				bodies := make(chan []byte, 10)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					bodies <- b
					io.WriteString(w, tc.answer)
				}))
				defer srv.Close()
				ch, err := Build("shared", tc.typ, fromYAML(t, "url: "+srv.URL+"/hook\ntenants: [\"*\"]\n"+title+tc.yaml), BuildOptions{})
				if err != nil {
					t.Fatal(err)
				}
				n := notifytest.Hostile("team-a", "shared")
				n.Alert.Group = strings.Repeat(`[`, apollo.MaxNameBytes)
				n.Alert.Summary = strings.Repeat(`"\<`, 1<<20/3)
				notifytest.Deliver(t, ch, n)
				tc.check(t, <-bodies)
			})
		}
	}
}
