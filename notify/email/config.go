package email

import (
	"errors"
	"fmt"
	"net/mail"

	"github.com/apollo-11/apollo/notify"
)

// TLS modes.
const (
	TLSStartTLS = "starttls" // plain connection upgraded with STARTTLS (port 587); required
	TLSImplicit = "implicit" // TLS from the first byte (port 465)
	TLSNone     = "none"     // no encryption (port 25); only for a relay on a trusted network
)

// Authentication mechanisms.
const (
	AuthPlain = "plain"
	AuthLogin = "login"
	AuthNone  = "none"
)

// Config is an SMTP server and the addresses to write to.
type Config struct {
	Host string `yaml:"host" json:"host"`
	// Port defaults by TLS mode: 587, 465 or 25.
	Port int `yaml:"port,omitempty" json:"port,omitempty"`
	// TLS is starttls (default), implicit or none.
	TLS string `yaml:"tls,omitempty" json:"tls,omitempty"`
	// Auth is plain (default with a username), login, or none (default
	// without one).
	Auth     string        `yaml:"auth,omitempty" json:"auth,omitempty"`
	Username string        `yaml:"username,omitempty" json:"username,omitempty"`
	Password notify.Secret `yaml:"password,omitempty" json:"password,omitempty"`
	From     string        `yaml:"from" json:"from"`
	To       []string      `yaml:"to" json:"to"`
	// Hello is the name sent in EHLO; default this machine's hostname.
	Hello string `yaml:"hello,omitempty" json:"hello,omitempty"`
}

func (c Config) tlsMode() string {
	if c.TLS == "" {
		return TLSStartTLS
	}
	return c.TLS
}

func (c Config) auth() string {
	switch {
	case c.Auth != "":
		return c.Auth
	case c.Username != "":
		return AuthPlain
	}
	return AuthNone
}

func (c Config) port() int {
	if c.Port != 0 {
		return c.Port
	}
	switch c.tlsMode() {
	case TLSImplicit:
		return 465
	case TLSNone:
		return 25
	}
	return 587
}

// Validate reports every problem, each naming its field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, msg, hint string) { errs = append(errs, notify.Invalid(field, msg, hint)) }
	if c.Host == "" {
		bad("host", "missing SMTP server", "e.g. smtp.exmail.qq.com")
	}
	if c.Port < 0 || c.Port > 65535 {
		bad("port", fmt.Sprintf("port %d out of range", c.Port), "use 587 (starttls), 465 (implicit) or 25")
	}
	switch c.tlsMode() {
	case TLSStartTLS, TLSImplicit, TLSNone:
	default:
		bad("tls", "unknown TLS mode "+c.TLS, "use starttls, implicit or none")
	}
	switch c.auth() {
	case AuthPlain, AuthLogin:
		if c.Username == "" || c.Password == "" {
			bad("auth", c.auth()+" authentication needs username and password", "set both, or auth: none")
		}
	case AuthNone:
	default:
		bad("auth", "unknown authentication "+c.Auth, "use plain, login or none")
	}
	if c.tlsMode() == TLSNone && c.auth() != AuthNone && !localhost(c.Host) {
		// go-mail refuses, at every message: it would be retried until
		// give_up_after and never sent.
		bad("tls", fmt.Sprintf("tls: none would send the password for %s in clear text", c.Host),
			"use tls: starttls or implicit, or auth: none for a relay on a trusted network that needs no login")
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		bad("from", fmt.Sprintf("%q is not an address", c.From), `e.g. "Apollo-11 <alerts@example.com>"`)
	}
	if len(c.To) == 0 {
		bad("to", "no recipients", "list at least one address")
	}
	for _, to := range c.To {
		if _, err := mail.ParseAddress(to); err != nil {
			bad("to", fmt.Sprintf("%q is not an address", to), "e.g. oncall@example.com")
		}
	}
	return errors.Join(errs...)
}

// localhost reports whether host names this machine as go-mail (v0.8.1)
// reads it: the one server it sends credentials to without TLS.
func localhost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}
