package dingtalk

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
)

// maxTitle and maxText keep a message under DingTalk's size limit (about
// 20 000 bytes): the title is the chat list's preview, and a title
// template may make it as long as a digest.
const (
	maxTitle = 1000
	maxText  = 18000
)

// Error codes DingTalk answers with inside a 200 that are worth retrying:
// -1 "system busy" and 130101 "sending too fast" (more than 20 a minute).
// Everything else (310000 keyword/sign/IP check failed, 300001 bad token,
// ...) will fail the same way next time.
var retryableCodes = map[int]bool{-1: true, 130101: true}

// Notifier posts to one DingTalk robot.
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
	hook := notify.Endpoint{Channel: "dingtalk", Client: opts.Client, Verdict: notify.ErrCode, CodeName: "errcode", Retryable: retryableCodes}
	return &Notifier{cfg: cfg, hook: hook, clock: opts.Clock}, nil
}

type payload struct {
	MsgType  string   `json:"msgtype"`
	Markdown markdown `json:"markdown"`
	At       at       `json:"at"`
}

type markdown struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

type at struct {
	AtMobiles []string `json:"atMobiles,omitempty"`
	IsAtAll   bool     `json:"isAtAll"`
}

// Notify sends m as a markdown message.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	target, err := n.target()
	if err != nil {
		return false, err
	}
	return n.hook.PostJSON(ctx, target, n.payload(m))
}

func (n *Notifier) payload(m *notify.Message) payload {
	// DingTalk notifies a mentioned member only if the text names them,
	// so a long message is cut before the mentions.
	var mentions string
	if len(n.cfg.AtMobiles) > 0 {
		mentions = "\n\n@" + strings.Join(n.cfg.AtMobiles, " @")
	}
	return payload{
		MsgType:  "markdown",
		Markdown: markdown{Title: notify.Truncate(m.Title, maxTitle), Text: notify.TruncateWithTail(m.Markdown, mentions, maxText)},
		At:       at{AtMobiles: n.cfg.AtMobiles, IsAtAll: n.cfg.AtAll},
	}
}

// target is the webhook URL, with timestamp and sign added when the robot
// signs: HMAC-SHA256 keyed by the secret over "timestamp\nsecret", base64.
func (n *Notifier) target() (string, error) {
	if n.cfg.Secret == "" {
		return string(n.cfg.URL), nil
	}
	u, err := url.Parse(string(n.cfg.URL))
	if err != nil {
		return "", fmt.Errorf("dingtalk: url %s: unparsable", notify.RedactURL(string(n.cfg.URL)))
	}
	ts := strconv.FormatInt(n.clock.Now().UnixMilli(), 10)
	q := u.Query()
	q.Set("timestamp", ts)
	q.Set("sign", sign(ts, string(n.cfg.Secret)))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// sign is DingTalk's signature of a millisecond timestamp.
func sign(timestamp, secret string) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(timestamp + "\n" + secret))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}
