package webhook

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/template"

	"github.com/apollo-11/apollo/notify"
)

// Payload formats.
const (
	FormatApollo       = "apollo"
	FormatAlertmanager = "alertmanager"
)

// Config is one webhook endpoint.
type Config struct {
	URL notify.SecretURL `yaml:"url" json:"url"`
	// Format is "apollo" (default: the notification as JSON) or
	// "alertmanager" (Alertmanager's webhook payload, version 4).
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
	// Headers are added to every request (Authorization, Content-Type...).
	// Their values are treated as secrets.
	Headers map[string]notify.Secret `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Template, when set, is the request body: a text/template over the
	// rendered notify.Message, with the template functions plus json.
	Template string `yaml:"template,omitempty" json:"template,omitempty"`
}

func (c Config) format() string {
	if c.Format == "" {
		return FormatApollo
	}
	return c.Format
}

// Validate reports every problem, each naming its field.
func (c Config) Validate() error {
	errs := []error{notify.CheckURL("url", c.URL)}
	switch f := c.format(); {
	case f != FormatApollo && f != FormatAlertmanager:
		errs = append(errs, notify.Invalid("format", "unknown format "+c.Format, `use "apollo" or "alertmanager"`))
	case c.Template != "" && c.Format != "":
		errs = append(errs, notify.Invalid("template", "template and format both say what the body is",
			"keep one: template for a custom body, format for a standard one"))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
		if k == "" || strings.ContainsAny(k, " :\r\n") || http.CanonicalHeaderKey(k) == "Host" {
			errs = append(errs, notify.Invalid("headers", "bad header name "+k, "use names such as Authorization or X-Token"))
			continue
		}
		// Go's HTTP client refuses such a value at every request, so every
		// message would be retried until give_up_after and then lost. The
		// value is a secret: the message names the header only.
		if strings.ContainsFunc(string(c.Headers[k]), func(r rune) bool { return r != '\t' && (r < 0x20 || r == 0x7f) }) {
			errs = append(errs, notify.Invalid("headers", "the value of "+k+" has a line break or another control character",
				"a token read from a file keeps its trailing newline: strip it where the environment variable is set"))
		}
	}
	if c.Template != "" {
		if _, err := template.New("body").Funcs(funcs(nil)).Parse(c.Template); err != nil {
			errs = append(errs, notify.Invalid("template", "template does not parse: "+err.Error(), "fix the text/template syntax"))
		}
	}
	return errors.Join(errs...)
}
