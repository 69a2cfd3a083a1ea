package channels

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/notifytest"
)

// strs collects every string in a JSON document: what a robot shows is
// somewhere among them.
func strs(t *testing.T, body []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// Every channel shows each message's tenant, and a job name and run ID
// built to forge a link, a mention, a tag or a heading reach it inert, in
// its own markup: two tenants share each channel, both send hostile text.
// (Email is checked in package email, with its SMTP server.)
func TestHostileTextIsInertOnEveryChannel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ, yaml, answer string
		// visible picks what people read from one request body; nil: every
		// string of the JSON.
		visible func(t *testing.T, body []byte) []string
	}{
		{typ: "dingtalk", answer: `{"errcode":0}`},
		{typ: "wecom", answer: `{"errcode":0}`},
		{typ: "wecom", yaml: "msgtype: text", answer: `{"errcode":0}`},
		{typ: "feishu", answer: `{"code":0}`},
		{typ: "feishu", yaml: "msg_type: text", answer: `{"code":0}`},
		{typ: "slack", answer: "ok"},
		{typ: "webhook", answer: "", visible: func(t *testing.T, body []byte) []string {
			// The notification itself goes as it is, for machines; people
			// read the rendered title and text.
			var p struct{ Title, Text string }
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatal(err)
			}
			return []string{p.Title, p.Text}
		}},
	} {
		t.Run(tc.typ+" "+tc.yaml, func(t *testing.T) {
			t.Parallel()
			bodies := make(chan []byte, 10)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				bodies <- b
				io.WriteString(w, tc.answer)
			}))
			defer srv.Close()
			raw := fromYAML(t, "url: "+srv.URL+"/hook\ntenants: [\"*\"]\n"+tc.yaml)
			ch, err := Build("shared", tc.typ, raw, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			notifytest.Deliver(t, ch, notifytest.Hostile("team-a", "shared"), notifytest.Hostile("team-b", "shared"))
			for _, tenant := range []string{"team-a", "team-b"} {
				body := <-bodies
				visible := strs(t, body)
				if tc.visible != nil {
					visible = tc.visible(t, body)
				}
				notifytest.CheckInert(t, tenant, visible...)
				if other := map[string]string{"team-a": "team-b", "team-b": "team-a"}[tenant]; strings.Contains(string(body), other) {
					t.Errorf("%s's message names %s:\n%s", tenant, other, body)
				}
			}
		})
	}
	t.Run("console", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{"text", "markdown"} {
			// Deliver stops the dispatcher before it returns: the lane is done
			// writing.
			var out bytes.Buffer
			ch, err := Build("shared", "console", map[string]any{"body": body, "tenants": []any{"team-a", "team-b"}},
				BuildOptions{NotifierOptions: notify.NotifierOptions{Output: &out}})
			if err != nil {
				t.Fatal(err)
			}
			notifytest.Deliver(t, ch, notifytest.Hostile("team-a", "shared"), notifytest.Hostile("team-b", "shared"))
			messages := strings.SplitAfter(out.String(), "\n\n== ")
			if len(messages) != 2 {
				t.Fatalf("%d messages on the console:\n%s", len(messages), out.String())
			}
			notifytest.CheckInert(t, "[team-a]", messages[0])
			notifytest.CheckInert(t, "[team-b]", messages[1])
		}
	})
}
