package feishu

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
)

// Feishu refuses a request body over 20 KB, counted as sent: as JSON, where
// a quote takes two bytes. The message and the card's title are cut to
// these sizes written so, leaving room for the rest of the body.
const (
	maxContent = 18000
	maxTitle   = 1000
)

// Error codes worth retrying: 11232 is "sending too frequently" (a bot may
// send 100 a minute, 5 a second). Others (19021 bad signature, 19024
// keyword check failed, 9499 bad request) will fail the same way again.
var retryableCodes = map[int]bool{11232: true}

// Notifier posts to one Feishu bot.
type Notifier struct {
	cfg   Config
	hook  notify.Endpoint
	clock apollo.Clock
}

var _ notify.Notifier = (*Notifier)(nil)

// New checks cfg and returns its notifier.
func New(cfg Config, opts notify.NotifierOptions) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	hook := notify.Endpoint{Channel: "feishu", Client: opts.Client, Verdict: verdict, CodeName: "code", Retryable: retryableCodes}
	return &Notifier{cfg: cfg, hook: hook, clock: opts.Clock}, nil
}

type payload struct {
	Timestamp string       `json:"timestamp,omitempty"`
	Sign      string       `json:"sign,omitempty"`
	MsgType   string       `json:"msg_type"`
	Content   *textContent `json:"content,omitempty"`
	Card      *card        `json:"card,omitempty"`
}

type textContent struct {
	Text string `json:"text"`
}

type card struct {
	Config   cardConfig    `json:"config"`
	Header   cardHeader    `json:"header"`
	Elements []cardElement `json:"elements"`
}

type cardConfig struct {
	WideScreenMode bool `json:"wide_screen_mode"`
}

type cardHeader struct {
	Title    plainText `json:"title"`
	Template string    `json:"template"`
}

type plainText struct {
	Tag     string `json:"tag"`
	Content string `json:"content"`
}

type cardElement struct {
	Tag     string `json:"tag"`
	Content string `json:"content"`
}

// answer covers both shapes Feishu answers with: {code,msg} and the older
// {StatusCode,StatusMessage}.
type answer struct {
	Code          *int   `json:"code"`
	Msg           string `json:"msg"`
	StatusCode    *int   `json:"StatusCode"`
	StatusMessage string `json:"StatusMessage"`
}

// verdict reads an answer of either shape; one without a code is success.
func verdict(body []byte) (int, string, error) {
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return 0, "", err
	}
	code, msg := a.Code, a.Msg
	if code == nil {
		code, msg = a.StatusCode, a.StatusMessage
	}
	if code == nil {
		return 0, "", nil
	}
	return *code, msg, nil
}

// Notify sends m.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	return n.hook.PostJSON(ctx, string(n.cfg.URL), n.payload(m))
}

func (n *Notifier) payload(m *notify.Message) payload {
	var p payload
	if n.cfg.Secret != "" {
		p.Timestamp = strconv.FormatInt(n.clock.Now().Unix(), 10)
		p.Sign = sign(p.Timestamp, string(n.cfg.Secret))
	}
	if n.cfg.msgType() == MsgText {
		p.MsgType, p.Content = MsgText, &textContent{Text: notify.TruncateJSON(m.Title+"\n\n"+m.Text, maxContent)}
		return p
	}
	p.MsgType = MsgInteractive
	p.Card = &card{
		Config: cardConfig{WideScreenMode: true},
		Header: cardHeader{Title: plainText{Tag: "plain_text", Content: notify.TruncateJSON(m.Title, maxTitle)}, Template: color(m)},
		Elements: []cardElement{{Tag: "markdown",
			Content: notify.TruncateJSON(cardMarkdown(m.Markdown), maxContent)}},
	}
	return p
}

// sign is Feishu's signature: HMAC-SHA256 keyed by "timestamp\nsecret"
// over an empty message, base64.
func sign(timestamp, secret string) string {
	h := hmac.New(sha256.New, []byte(timestamp+"\n"+secret))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// color is the card header's template colour: green when resolved, by
// severity otherwise.
func color(m *notify.Message) string {
	switch m.Notification.Kind {
	case apollo.NotifyResolved:
		return "green"
	case apollo.NotifyTest:
		return "blue"
	case notify.KindDigest:
		return "indigo"
	}
	switch m.Notification.Alert.Severity {
	case apollo.SeverityCritical:
		return "red"
	case apollo.SeverityWarning:
		return "orange"
	}
	return "blue"
}
