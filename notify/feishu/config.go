package feishu

import (
	"errors"

	"github.com/apollo-11/apollo/notify"
)

// Message types a Feishu bot takes from Apollo-11.
const (
	MsgInteractive = "interactive"
	MsgText        = "text"
)

// Config is a Feishu custom bot.
type Config struct {
	// URL is the bot's webhook (…/open-apis/bot/v2/hook/<token>).
	URL notify.SecretURL `yaml:"url" json:"url"`
	// Secret is the signing secret, when the bot's security setting is
	// "signature verification" (签名校验).
	Secret notify.Secret `yaml:"secret,omitempty" json:"secret,omitempty"`
	// MsgType is "interactive" (a card; default) or "text".
	MsgType string `yaml:"msg_type,omitempty" json:"msg_type,omitempty"`
}

func (c Config) msgType() string {
	if c.MsgType == "" {
		return MsgInteractive
	}
	return c.MsgType
}

// Validate reports every problem, each naming its field.
func (c Config) Validate() error {
	errs := []error{notify.CheckURL("url", c.URL)}
	if t := c.msgType(); t != MsgInteractive && t != MsgText {
		errs = append(errs, notify.Invalid("msg_type", "unknown message type "+c.MsgType, `use "interactive" or "text"`))
	}
	return errors.Join(errs...)
}
