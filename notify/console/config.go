package console

import "github.com/apollo-11/apollo/notify"

// Config is a console channel.
type Config struct {
	// Body is "text" (default), "markdown", or "line": which rendering to
	// write, or one line per message (time, channel, title, summary).
	Body string `yaml:"body,omitempty" json:"body,omitempty"`
}

// Validate reports every problem, each naming its field.
func (c Config) Validate() error {
	switch c.Body {
	case "", "text", "markdown", "line":
		return nil
	}
	return notify.Invalid("body", "unknown body "+c.Body, `use "text", "markdown" or "line"`)
}
