package slack

import "github.com/apollo-11/apollo/notify"

// Config is a Slack incoming webhook.
type Config struct {
	// URL is the webhook (https://hooks.slack.com/services/…).
	URL notify.SecretURL `yaml:"url" json:"url"`
}

// Validate reports every problem, each naming its field.
func (c Config) Validate() error { return notify.CheckURL("url", c.URL) }
