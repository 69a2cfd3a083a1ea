package notify

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"unicode"
)

// Redacted is what a secret prints as.
const Redacted = "REDACTED"

// Secret is a string that never prints: fmt (every verb), slog, JSON and
// YAML all show REDACTED. Use string(s) where the value is really needed.
type Secret string

// Format prints REDACTED, or nothing for an empty secret, for every verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.shown()) }

// LogValue keeps the secret out of structured logs.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.shown()) }

// MarshalJSON keeps the secret out of JSON dumps of a configuration.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.shown()) }

// MarshalYAML keeps the secret out of YAML dumps of a configuration.
func (s Secret) MarshalYAML() (any, error) { return s.shown(), nil }

func (s Secret) shown() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// SecretURL is a URL that carries a credential (a webhook token in the query
// or the path, a password in the userinfo). It prints as RedactURL shows it.
type SecretURL string

// Format prints the redacted URL for every verb.
func (u SecretURL) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, RedactURL(string(u))) }

// LogValue keeps the credential out of structured logs.
func (u SecretURL) LogValue() slog.Value { return slog.StringValue(RedactURL(string(u))) }

// MarshalJSON keeps the credential out of JSON dumps of a configuration.
func (u SecretURL) MarshalJSON() ([]byte, error) { return json.Marshal(RedactURL(string(u))) }

// MarshalYAML keeps the credential out of YAML dumps of a configuration.
func (u SecretURL) MarshalYAML() (any, error) { return RedactURL(string(u)), nil }

// RedactURL returns raw with every credential it may hold replaced by
// REDACTED: the userinfo, every query value, the fragment, and each path
// segment that looks like a token. Webhook services put tokens in the query
// (DingTalk access_token, WeCom key) or in the path (Feishu hook ID, Slack
// service path), so paths are not trusted either. A string that does not
// parse as a URL is redacted whole.
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return Redacted
	}
	if u.User != nil {
		u.User = url.User(Redacted)
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = Redacted + "=" + Redacted
		} else {
			for k := range q {
				q[k] = []string{Redacted}
			}
			u.RawQuery = q.Encode()
		}
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = Redacted, ""
	}
	segs := strings.Split(u.Path, "/")
	for i, s := range segs {
		if looksLikeToken(s) {
			segs[i] = Redacted
		}
	}
	u.Path, u.RawPath = strings.Join(segs, "/"), ""
	return u.String()
}

// looksLikeToken reports whether a path segment may be a credential: long,
// or mixing letters and digits the way generated IDs do. "robot", "send",
// "v2", "hook" and "services" survive; UUIDs and Slack's B0123ABCD do not.
func looksLikeToken(s string) bool {
	if len(s) >= 16 {
		return true
	}
	if len(s) < 8 {
		return false
	}
	var letter, digit bool
	for _, r := range s {
		letter = letter || unicode.IsLetter(r)
		digit = digit || unicode.IsDigit(r)
	}
	return letter && digit
}

var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)

// RedactText redacts every URL found in s. Errors from HTTP clients quote
// the request URL ("Post \"https://...?access_token=...\": dial tcp ...");
// this is the last line of defence before such text is logged or stored.
func RedactText(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, func(u string) string {
		// A colon or a full stop after a URL ends a phrase ("POST URL: 401"):
		// kept, not taken for the end of a query value and redacted with it.
		t := strings.TrimRight(u, ".,:;)")
		return RedactURL(t) + u[len(t):]
	})
}
