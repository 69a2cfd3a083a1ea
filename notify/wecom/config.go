package wecom

import (
	"errors"
	"slices"

	"github.com/apollo-11/apollo/notify"
)

// Message types a WeCom robot takes from Apollo-11.
const (
	MsgMarkdown = "markdown"
	MsgText     = "text"
)

// Config is a WeCom group robot.
type Config struct {
	// URL is the robot's webhook, with its key.
	URL notify.SecretURL `yaml:"url" json:"url"`
	// MsgType is "markdown" (default) or "text".
	MsgType string `yaml:"msgtype,omitempty" json:"msgtype,omitempty"`
	// MentionedList are user IDs to mention; "@all" mentions everyone
	// (text only).
	MentionedList []string `yaml:"mentioned_list,omitempty" json:"mentioned_list,omitempty"`
	// MentionedMobileList are phone numbers to mention (text only: WeCom's
	// markdown messages cannot mention by phone number).
	MentionedMobileList []string `yaml:"mentioned_mobile_list,omitempty" json:"mentioned_mobile_list,omitempty"`
}

func (c Config) msgType() string {
	if c.MsgType == "" {
		return MsgMarkdown
	}
	return c.MsgType
}

// Validate reports every problem, each naming its field.
func (c Config) Validate() error {
	errs := []error{notify.CheckURL("url", c.URL)}
	switch c.msgType() {
	case MsgMarkdown:
		if len(c.MentionedMobileList) > 0 {
			errs = append(errs, notify.Invalid("mentioned_mobile_list",
				"WeCom markdown messages cannot mention by phone number",
				"set msgtype: text, or mention user IDs with mentioned_list"))
		}
		if slices.Contains(c.MentionedList, "@all") {
			// It used to be skipped without a word: nobody was pinged.
			errs = append(errs, notify.Invalid("mentioned_list",
				`WeCom markdown messages cannot mention everyone ("@all")`,
				`set msgtype: text to mention @all, or list user IDs`))
		}
	case MsgText:
	default:
		errs = append(errs, notify.Invalid("msgtype", "unknown message type "+c.MsgType, `use "markdown" or "text"`))
	}
	return errors.Join(errs...)
}
