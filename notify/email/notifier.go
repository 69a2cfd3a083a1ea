package email

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"slices"
	"strings"
	"sync"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
	mail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"
)

// Notifier sends each message as one email over a new SMTP connection:
// alerts are rare enough that a pooled connection would mostly be a dead
// one.
type Notifier struct {
	cfg   Config
	clock apollo.Clock
	tls   *tls.Config
}

var _ notify.Notifier = (*Notifier)(nil)

// New checks cfg and returns its notifier.
func New(cfg Config, opts notify.NotifierOptions) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.TLSConfig != nil {
		tc = opts.TLSConfig.Clone()
	}
	if tc.ServerName == "" {
		tc.ServerName = cfg.Host
	}
	return &Notifier{cfg: cfg, clock: opts.Clock, tls: tc}, nil
}

// Notify sends m to every recipient.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	msg, err := n.message(m)
	if err != nil {
		return false, fmt.Errorf("email: %w", err)
	}
	d := &dialer{ctx: ctx, implicit: n.cfg.tlsMode() == TLSImplicit, tls: n.tls}
	defer d.release()
	c, err := mail.NewClient(n.cfg.Host, n.options(d)...)
	if err != nil {
		return false, fmt.Errorf("email: %w", err)
	}
	if retry, err := send(ctx, c, msg); err != nil {
		if ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
		if noSTARTTLS(err) {
			return false, fmt.Errorf("email: %s:%d: %w (the server offers no STARTTLS: set tls: implicit for a server that speaks TLS from the start, or tls: none for a relay on a trusted network)",
				n.cfg.Host, n.cfg.port(), err)
		}
		return retry, fmt.Errorf("email: %s:%d: %w", n.cfg.Host, n.cfg.port(), err)
	}
	return false, nil
}

// send sends msg over one connection to every recipient the server takes.
// go-mail's own Send gives up on the message when the server refuses any
// one recipient, so one address in "to" that no longer exists (550 at
// RCPT TO) would keep every alert from everyone else on the list. Here
// the others still get it. Recipients refused for the moment (452 "too
// many recipients" above all) go in another message on the same
// connection, for as long as each message reaches someone. What is
// refused in the end comes back as a partialError, not retryable: a retry
// would send the message again to those who have it. Only when nobody got
// it is a refusal retried, if one was temporary.
func send(ctx context.Context, c *mail.Client, msg *mail.Msg) (bool, error) {
	sc, err := c.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return retryable(err), fmt.Errorf("dial failed: %w", err)
	}
	defer func() { _ = c.CloseWithSMTPClient(sc) }()
	from, err := msg.GetSender(false)
	if err != nil {
		return false, err
	}
	pending, err := msg.GetRecipients()
	if err != nil {
		return false, err
	}
	total, sent := len(pending), 0
	var gone, left []refusal // refused for good; refused in the last message
	for len(pending) > 0 {
		if sent > 0 {
			if err = sc.Reset(); err != nil {
				break
			}
		}
		var took int
		if took, left, err = transaction(sc, from, pending, msg); err != nil || took == 0 {
			break
		}
		sent += took
		pending = pending[:0:0]
		for _, r := range left {
			if r.temp {
				pending = append(pending, r.to)
			} else {
				gone = append(gone, r)
			}
		}
		left = nil
	}
	if err != nil {
		if sent == 0 {
			return retryable(err), err
		}
		left = left[:0]
		for _, to := range pending {
			left = append(left, refusal{to: to, err: err, temp: true})
		}
	}
	left = append(gone, left...)
	if sent == 0 {
		return slices.ContainsFunc(left, func(r refusal) bool { return r.temp }),
			fmt.Errorf("RCPT TO: every recipient refused: %w", refusals(left))
	}
	if len(left) > 0 {
		return false, &partialError{sent: sent, total: total, refused: left}
	}
	return false, nil
}

// transaction sends msg to the recipients of to that the server takes,
// and returns how many took it and who was refused. With nobody taken it
// sends nothing.
func transaction(sc *smtp.Client, from string, to []string, msg *mail.Msg) (int, []refusal, error) {
	if err := sc.Mail(from); err != nil {
		return 0, nil, fmt.Errorf("MAIL FROM: %w", err)
	}
	var refused []refusal
	for _, addr := range to {
		if err := sc.Rcpt(addr); err != nil {
			refused = append(refused, refusal{to: addr, err: err, temp: retryable(err)})
		}
	}
	if len(refused) == len(to) {
		return 0, refused, nil
	}
	w, err := sc.Data()
	if err != nil {
		return 0, nil, fmt.Errorf("DATA: %w", err)
	}
	if _, err := msg.WriteTo(w); err != nil {
		_ = w.Close()
		return 0, nil, fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return 0, nil, fmt.Errorf("DATA: %w", err)
	}
	return len(to) - len(refused), refused, nil
}

// refusal is a recipient the server did not take, and its answer.
type refusal struct {
	to   string
	err  error
	temp bool // a 4xx, or the connection failed
}

// refusals lists them on one line, for the attempt record and the log.
type refusals []refusal

func (rs refusals) Error() string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.to + ": " + r.err.Error()
	}
	return strings.Join(s, "; ")
}

func (rs refusals) Unwrap() []error {
	errs := make([]error, len(rs))
	for i, r := range rs {
		errs[i] = r.err
	}
	return errs
}

// partialError is a message the server took for some recipients and
// refused for the others.
type partialError struct {
	sent, total int
	refused     refusals
}

func (e *partialError) Error() string {
	s := fmt.Sprintf("sent to %d of %d recipients; refused: %v", e.sent, e.total, e.refused)
	if slices.ContainsFunc(e.refused, func(r refusal) bool { return r.temp }) {
		s += " (not retried: the others have it)"
	}
	return s
}

func (e *partialError) Unwrap() error { return e.refused }

// noSTARTTLS reports whether err is go-mail refusing to go on because the
// server's EHLO lacks STARTTLS, which the channel requires. go-mail says
// so in text only (a plain fmt.Errorf, in v0.8.1);
// TestServerWithoutSTARTTLSFailsOnce fails if that text changes.
func noSTARTTLS(err error) bool {
	return strings.Contains(err.Error(), "does not support STARTTLS")
}

func (n *Notifier) message(m *notify.Message) (*mail.Msg, error) {
	msg := mail.NewMsg()
	if err := msg.From(n.cfg.From); err != nil {
		return nil, err
	}
	if err := msg.To(n.cfg.To...); err != nil {
		return nil, err
	}
	msg.Subject(m.Title)
	msg.SetDateWithValue(n.clock.Now())
	msg.SetMessageID()
	msg.SetBodyString(mail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(mail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

func (n *Notifier) options(d *dialer) []mail.Option {
	opts := []mail.Option{mail.WithPort(n.cfg.port()), mail.WithTLSConfig(n.tls), mail.WithDialContextFunc(d.dial)}
	switch n.cfg.tlsMode() {
	case TLSImplicit:
		opts = append(opts, mail.WithSSL())
	case TLSNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	}
	if n.cfg.Hello != "" {
		opts = append(opts, mail.WithHELO(n.cfg.Hello))
	}
	switch n.cfg.auth() {
	case AuthPlain:
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthPlain))
	case AuthLogin:
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthLogin))
	}
	if n.cfg.auth() != AuthNone {
		opts = append(opts, mail.WithUsername(n.cfg.Username), mail.WithPassword(string(n.cfg.Password)))
	}
	return opts
}

// dialer makes go-mail's connection and closes it when the attempt's
// context ends: go-mail honours the context while dialling only, and a
// server that stops answering mid-conversation must not hold the lane
// past the attempt's timeout.
type dialer struct {
	ctx      context.Context
	implicit bool
	tls      *tls.Config
	mu       sync.Mutex
	stops    []func() bool
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := &net.Dialer{}
	var conn net.Conn
	var err error
	if d.implicit {
		conn, err = (&tls.Dialer{NetDialer: nd, Config: d.tls}).DialContext(ctx, network, addr)
	} else {
		conn, err = nd.DialContext(ctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.stops = append(d.stops, context.AfterFunc(d.ctx, func() { conn.Close() }))
	d.mu.Unlock()
	return conn, nil
}

func (d *dialer) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, stop := range d.stops {
		stop()
	}
}

// retryable: SMTP 4xx replies and network trouble pass; 5xx replies,
// refused credentials, a certificate that does not verify, or a server
// without STARTTLS will fail the same way next time.
func retryable(err error) bool {
	var se *mail.SendError
	if errors.As(err, &se) {
		return se.IsTemp()
	}
	var pe *textproto.Error
	if errors.As(err, &pe) {
		return pe.Code/100 == 4
	}
	var ce *tls.CertificateVerificationError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	if errors.As(err, &ce) || errors.As(err, &ue) || errors.As(err, &he) ||
		errors.Is(err, mail.ErrPlainAuthNotSupported) || errors.Is(err, mail.ErrLoginAuthNotSupported) ||
		errors.Is(err, smtp.ErrUnencrypted) {
		return false
	}
	return true
}
