package notify

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// NotifierOptions is what a channel's notifier takes from its surroundings
// rather than from its configuration.
type NotifierOptions struct {
	// Name is the channel's name; payloads that carry a receiver show it.
	Name string
	// Client makes webhook requests. Default: a client without a timeout
	// of its own; the dispatcher's per-attempt timeout bounds each call.
	Client *http.Client
	// Clock stamps signatures and Date headers. Default apollo.SystemClock.
	Clock apollo.Clock
	// TLSConfig is the base TLS configuration for SMTP (trusted roots, for
	// a relay with a private CA, and tests). Default: the system's roots.
	TLSConfig *tls.Config
	// ExternalURL is Apollo-11's web address, for payloads with a link.
	ExternalURL string
	// Output is where the console channel writes. Default os.Stdout.
	Output io.Writer
	// Location is the time zone of times in custom webhook bodies.
	// Default time.Local.
	Location *time.Location
}

// WithDefaults fills the zero fields that have defaults.
func (o NotifierOptions) WithDefaults() NotifierOptions {
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.Clock == nil {
		o.Clock = apollo.SystemClock
	}
	if o.Output == nil {
		o.Output = os.Stdout
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	return o
}

// CheckURL checks a webhook URL from a channel's configuration: present,
// absolute, http or https. The message shows the URL redacted.
func CheckURL(field string, raw SecretURL) error {
	if raw == "" {
		return &apollo.Error{Code: apollo.EINVALID, Field: field, Message: "missing webhook URL",
			Hint: "copy the robot's webhook address; use ${ENV_VAR} to keep its token out of the file"}
	}
	u, err := url.Parse(string(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &apollo.Error{Code: apollo.EINVALID, Field: field,
			Message: fmt.Sprintf("%s is not an http(s) URL", RedactURL(string(raw))),
			Hint:    "write the full address, starting with https://"}
	}
	return nil
}

// Invalid is the error for a field of a channel's configuration.
func Invalid(field, message, hint string) *apollo.Error {
	return &apollo.Error{Code: apollo.EINVALID, Field: field, Message: message, Hint: hint}
}
