package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://oapi.dingtalk.com/robot/send?access_token=abc123def", "https://oapi.dingtalk.com/robot/send?access_token=REDACTED"},
		{"https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7xxx", "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=REDACTED"},
		{"https://open.feishu.cn/open-apis/bot/v2/hook/5e3d587e-d78e-4a07-bd07-265f269f86fd", "https://open.feishu.cn/open-apis/bot/v2/hook/REDACTED"},
		{"https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "https://hooks.slack.com/services/REDACTED/REDACTED/REDACTED"},
		{"https://user:pa55word@example.com/hook?a=1&b=2#frag", "https://REDACTED@example.com/hook?a=REDACTED&b=REDACTED#REDACTED"},
		{"http://127.0.0.1:8080/alerts", "http://127.0.0.1:8080/alerts"},
		{"", ""},
		{"://bad", "REDACTED"},
		{"mailto:ops@example.com", "REDACTED"},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactText(t *testing.T) {
	t.Parallel()
	in := `Post "https://oapi.dingtalk.com/robot/send?access_token=tok3n&timestamp=1&sign=s1gn": dial tcp: connection refused`
	got := RedactText(in)
	for _, secret := range []string{"tok3n", "s1gn"} {
		if strings.Contains(got, secret) {
			t.Fatalf("%q leaks %q", got, secret)
		}
	}
	if !strings.HasSuffix(got, `": dial tcp: connection refused`) || !strings.Contains(got, "access_token=REDACTED") {
		t.Fatalf("%q", got)
	}
	if got := RedactText("POST https://h.example/hook?key=k3y: 401 Unauthorized"); got != "POST https://h.example/hook?key=REDACTED: 401 Unauthorized" {
		t.Fatalf("the colon after the URL: %q", got)
	}
}

// A Secret and a SecretURL stay hidden whatever prints them.
func TestSecretsNeverPrint(t *testing.T) {
	t.Parallel()
	type config struct {
		URL    SecretURL
		Secret Secret
		Header map[string]Secret
	}
	c := config{URL: "https://oapi.dingtalk.com/robot/send?access_token=tok3n", Secret: "SECabc", Header: map[string]Secret{"Authorization": "Bearer b3arer"}}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		out = append(out, fmt.Sprintf(verb, c), fmt.Sprintf(verb, c.Secret), fmt.Sprintf(verb, c.URL))
	}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(j))
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("cfg", "cfg", c, "secret", c.Secret, "url", c.URL)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("cfg", "cfg", c, "secret", c.Secret, "url", c.URL)
	out = append(out, logs.String())
	all := strings.Join(out, "\n")
	for _, secret := range []string{"tok3n", "SECabc", "b3arer"} {
		if strings.Contains(all, secret) {
			t.Fatalf("%q printed:\n%s", secret, all)
		}
	}
	if !strings.Contains(all, "access_token=REDACTED") {
		t.Fatalf("URL not shown redacted:\n%s", all)
	}
}

func TestTransportErrorIsRedactedButKeepsChain(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	err := redactTransportError(&url.Error{Op: "Post", URL: "http://127.0.0.1:1/robot/send?access_token=tok3n", Err: cause})
	if strings.Contains(err.Error(), "tok3n") || !errors.Is(err, cause) {
		t.Fatalf("%v (is cause: %v)", err, errors.Is(err, cause))
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 5, "hello"}, {"hello world", 8, "hello…"}, {"告警告警", 8, "告…"}, {"告警告警", 2, ""},
	} {
		if got := Truncate(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// TruncateJSON counts the bytes the text takes in a JSON body.
func TestTruncateJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{`hello`, 5, `hello`}, {`"quoted"`, 9, `"quot…`}, {`""""`, 8, `""""`}, {`"""""`, 8, `""…`},
		{"a\x1bb", 8, "a\x1bb"}, {"a\x1bbcdef", 8, "a…"}, {"告警告警", 8, "告…"}, {`"""`, 2, ""},
		{"\xff\xff", 12, "\xff\xff"}, {"\xff\xffa", 12, "\xff…"},
	} {
		got := TruncateJSON(tc.in, tc.n)
		b, err := EncodeJSON(got)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want || len(b)-2 > tc.n {
			t.Errorf("TruncateJSON(%q, %d) = %q (%d bytes as JSON), want %q", tc.in, tc.n, got, len(b)-2, tc.want)
		}
	}
}

// FuzzRedactURL: a token put in the query, the userinfo or a long path
// segment never survives, redaction is stable, and nothing panics.
func FuzzRedactURL(f *testing.F) {
	f.Add("oapi.dingtalk.com", "robot/send", "4c2b1f0e9d8a7b6c")
	f.Add("open.feishu.cn", "open-apis/bot/v2/hook", "5e3d587e-d78e-4a07")
	f.Add("127.0.0.1:8080", "", "x")
	f.Add("[::1]:1", "a/%2F/b", "%zz")
	f.Fuzz(func(t *testing.T, host, path, token string) {
		for _, raw := range []string{
			"https://" + host + "/" + path + "?access_token=" + url.QueryEscape(token),
			"https://u:" + url.QueryEscape(token) + "@" + host + "/" + path,
			"https://" + host + "/" + path + "/" + url.PathEscape("tok-"+token+"-0123456789abcdef"),
		} {
			got := RedactURL(raw)
			if again := RedactURL(got); again != got {
				t.Fatalf("not stable: %q -> %q -> %q", raw, got, again)
			}
			if len(token) >= 6 && !strings.Contains(host+path+"REDACTEDhttps", token) && strings.Contains(got, token) {
				if _, err := url.Parse(raw); err == nil {
					t.Fatalf("%q leaks %q in %q", raw, token, got)
				}
			}
		}
		_ = RedactText(host + " " + path + " https://" + token)
	})
}
