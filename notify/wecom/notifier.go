package wecom

import (
	"context"
	"strings"

	"github.com/apollo-11/apollo/notify"
)

// WeCom's limits on message content, in bytes.
const (
	maxMarkdown = 4096
	maxText     = 2048
)

// Error codes WeCom answers with that are worth retrying: -1 "system busy"
// and 45009 "API frequency out of limit" (20 messages a minute per robot).
var retryableCodes = map[int]bool{-1: true, 45009: true}

// Notifier posts to one WeCom group robot.
type Notifier struct {
	cfg  Config
	hook notify.Endpoint
}

var _ notify.Notifier = (*Notifier)(nil)

// New checks cfg and returns its notifier.
func New(cfg Config, opts notify.NotifierOptions) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hook := notify.Endpoint{Channel: "wecom", Client: opts.WithDefaults().Client, Verdict: notify.ErrCode, CodeName: "errcode", Retryable: retryableCodes}
	return &Notifier{cfg: cfg, hook: hook}, nil
}

type payload struct {
	MsgType  string    `json:"msgtype"`
	Markdown *markdown `json:"markdown,omitempty"`
	Text     *text     `json:"text,omitempty"`
}

type markdown struct {
	Content string `json:"content"`
}

type text struct {
	Content             string   `json:"content"`
	MentionedList       []string `json:"mentioned_list,omitempty"`
	MentionedMobileList []string `json:"mentioned_mobile_list,omitempty"`
}

// Notify sends m.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	return n.hook.PostJSON(ctx, string(n.cfg.URL), n.payload(m))
}

func (n *Notifier) payload(m *notify.Message) payload {
	if n.cfg.msgType() == MsgText {
		return payload{MsgType: MsgText, Text: &text{
			Content:       notify.Truncate(m.Title+"\n\n"+m.Text, maxText),
			MentionedList: n.cfg.MentionedList, MentionedMobileList: n.cfg.MentionedMobileList,
		}}
	}
	// Markdown mentions are written in the content, by user ID; a long
	// message is cut before them.
	var mentions strings.Builder
	for _, id := range n.cfg.MentionedList { // "@all" is refused by Validate
		mentions.WriteString(" <@" + id + ">")
	}
	return payload{MsgType: MsgMarkdown, Markdown: &markdown{
		Content: notify.TruncateWithTail(strings.TrimSpace(m.Markdown), mentions.String(), maxMarkdown)}}
}
