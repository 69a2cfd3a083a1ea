package channels

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
	"go.yaml.in/yaml/v3"
)

// fromYAML decodes a channel's settings as the config loader hands them.
func fromYAML(t *testing.T, src string) map[string]any {
	t.Helper()
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(src), &raw); err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestBuildEveryType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ, yaml string
		rate      int
	}{
		{"dingtalk", "url: https://oapi.dingtalk.com/robot/send?access_token=x\nsecret: SECx\nat_mobiles: [\"138\"]", 20},
		{"wecom", "url: https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=x\nmsgtype: text\nmentioned_mobile_list: [\"138\"]", 20},
		{"feishu", "url: https://open.feishu.cn/open-apis/bot/v2/hook/x\nsecret: s\nmsg_type: text", 0},
		{"slack", "url: https://hooks.slack.com/services/T/B/X", 0},
		{"email", "host: smtp.example.com\nusername: u\npassword: p\nfrom: a@example.com\nto: ops@example.com", 0},
		{"webhook", "url: https://example.com/hook\nformat: alertmanager\nheaders: {Authorization: Bearer x}", 0},
		{"console", "body: markdown", 0},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			ch, err := Build("c1", tc.typ, fromYAML(t, tc.yaml), BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ch.Name != "c1" || ch.Type != tc.typ || ch.Notifier == nil || ch.RatePerMinute != tc.rate {
				t.Fatalf("%+v", ch)
			}
		})
	}
}

func TestBuildCommonSettings(t *testing.T) {
	t.Parallel()
	raw := fromYAML(t, `
type: dingtalk
url: https://oapi.dingtalk.com/robot/send?access_token=x
lang: zh-CN
rate_per_minute: 0
timeout: 5s
give_up_after: 600
queue_size: 50
queue_total: 400
templates:
  firing: "{{.Alert.Rule}}"
`)
	ch, err := Build("ding", "dingtalk", raw, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Lang != "zh-CN" || ch.RatePerMinute != 0 || ch.Timeout != 5*time.Second || ch.GiveUpAfter != 10*time.Minute ||
		ch.QueueSize != 50 || ch.QueueTotal != 400 || ch.Templates[apollo.NotifyFiring] != "{{.Alert.Rule}}" {
		t.Fatalf("%+v", ch)
	}
}

func TestBuildErrorsNameChannelAndField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, typ, yaml string
		want            []string
	}{
		{"unknown field", "dingtalk", "url: https://x/robot?access_token=s3cr3t\nat_mobile: [\"1\"]",
			[]string{`channels.ops.at_mobile: unknown field "at_mobile" for a dingtalk channel`, "known fields: url, secret, at_mobiles"}},
		{"unknown type", "pager", "url: https://x", []string{`channels.ops.type: unknown channel type "pager"`, "dingtalk, email"}},
		{"wrong kind", "email", "host: h\nport: \"587\"\nfrom: a@b.c\nto: [x@y.z]", []string{"channels.ops.port: want a whole number, got a string"}},
		{"bad duration", "slack", "url: https://h/x\ntimeout: soon", []string{"channels.ops.timeout: want a duration, got a string"}},
		{"bad rate", "slack", "url: https://h/x\nrate_per_minute: 2.5", []string{"channels.ops.rate_per_minute: want a whole number, got a number with a fraction"}},
		{"type mismatch", "slack", "type: email\nurl: https://h/x", []string{"channels.ops.type"}},
		{"from the channel package", "wecom", "url: https://h/x?key=s3cr3t\nmentioned_mobile_list: [\"1\"]", []string{"channels.ops.mentioned_mobile_list: WeCom markdown"}},
		{"several at once", "dingtalk", "secret: s3cr3t\nfoo: 1\nbar: 2", []string{"channels.ops.foo", "channels.ops.bar"}},
		{"missing url", "dingtalk", "secret: SECs3cr3t", []string{"channels.ops.url: missing webhook URL"}},
		{"tenants not a list", "slack", "url: https://h/x\ntenants: {a: 1}", []string{"channels.ops.tenants: want a list of strings, got a map"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build("ops", tc.typ, fromYAML(t, tc.yaml), BuildOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q\ndoes not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("secret in %q", err)
			}
			if apollo.ErrorCode(err) != apollo.EINVALID {
				t.Errorf("code %q", apollo.ErrorCode(err))
			}
		})
	}
}

// tenants: lists who may use a channel; one name is a list of one; left
// out, the channel is the default tenant's. An empty "tenants:" is a list
// of none, which the dispatcher refuses, rather than the default.
func TestBuildTenants(t *testing.T) {
	t.Parallel()
	for src, want := range map[string][]string{
		"":                        nil,
		"tenants: [team-a, \"\"]": {"team-a", ""},
		"tenants: team-a":         {"team-a"},
		"tenants: [\"*\"]":        {notify.AllTenants},
		"tenants:":                {},
	} {
		ch, err := Build("ops", "console", fromYAML(t, "body: text\n"+src), BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if (ch.Tenants == nil) != (want == nil) || strings.Join(ch.Tenants, ",") != strings.Join(want, ",") {
			t.Errorf("%q: tenants %q, want %q", src, ch.Tenants, want)
		}
	}
}

// A built webhook channel delivers through a dispatcher, with its name as
// the Alertmanager receiver.
func TestBuiltChannelDelivers(t *testing.T) {
	t.Parallel()
	got := make(chan map[string]any, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &p)
		got <- p
	}))
	defer srv.Close()
	ch, err := Build("am", "webhook", map[string]any{"url": srv.URL, "format": "alertmanager"}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := notify.NewDispatcher([]notify.Channel{ch}, notify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Test(context.Background(), "am"); err != nil {
		t.Fatal(err)
	}
	if p := <-got; p["receiver"] != "am" || p["version"] != "4" {
		t.Fatalf("%v", p)
	}
}

// FuzzBuild: whatever the settings hold, Build returns a channel or an
// error naming the channel, never panics, and never repeats a secret.
func FuzzBuild(f *testing.F) {
	f.Add("dingtalk", `{"url":"https://oapi.dingtalk.com/robot/send?access_token=x","secret":"SECx"}`)
	f.Add("email", `{"host":"h","port":70000,"to":"a@b.c","from":"x","password":"s3cr3t-pw"}`)
	f.Add("webhook", `{"url":"http://h/","template":"{{.Title","headers":{"A":"s3cr3t-pw"}}`)
	f.Add("wecom", `{"url":["x"],"timeout":-1,"templates":{"firing":3}}`)
	f.Add("slack", `{"url":"https://h/x","tenants":["*","team-a"]}`)
	f.Add("console", `{"tenants":null}`)
	f.Fuzz(func(t *testing.T, typ, settings string) {
		var raw map[string]any
		if json.Unmarshal([]byte(settings), &raw) != nil {
			return
		}
		ch, err := Build("fz", typ, raw, BuildOptions{})
		if err != nil {
			if !strings.Contains(err.Error(), "channels.fz") {
				t.Fatalf("error without the channel: %v", err)
			}
			if strings.Contains(err.Error(), "s3cr3t-pw") {
				t.Fatalf("secret in error: %v", err)
			}
			return
		}
		if ch.Notifier == nil || ch.Name != "fz" {
			t.Fatalf("%+v", ch)
		}
	})
}
