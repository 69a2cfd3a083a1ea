package console

import "github.com/apollo-11/apollo/notify"

// Config is a console channel.
type Config struct {
	// Body is "text" (default) or "markdown": which rendering to write.
	Body string `yaml:"body,omitempty" json:"body,omitempty"`
}

// Validate reports every problem, each naming its field.
func (c Config) Validate() error {
	if c.Body != "" && c.Body != "text" && c.Body != "markdown" {
		return notify.Invalid("body", "unknown body "+c.Body, `use "text" or "markdown"`)
	}
	return nil
}
