package email

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	netmail "net/mail"
	"strconv"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/notifytest"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// selfSigned makes a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "apollo test smtp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// mailbox is an SMTP backend that takes AUTH PLAIN (only over TLS, as
// go-smtp insists) and keeps what it receives.
type mailbox struct {
	user, pass string
	got        chan delivery
	// refuse answers RCPT TO for these addresses with this reply.
	refuse map[string]*smtp.SMTPError
	// maxRcpt > 0 takes at most this many recipients per message and
	// answers 452 for the others, as many servers do.
	maxRcpt int
}

type delivery struct {
	from string
	to   []string
	data string
	tls  bool
}

func (b *mailbox) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{box: b, conn: c}, nil
}

type session struct {
	box    *mailbox
	conn   *smtp.Conn
	authed bool
	d      delivery
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.box.user || pass != s.box.pass {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		s.authed = true
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed && s.box.user != "" {
		return smtp.ErrAuthRequired
	}
	s.d.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if e := s.box.refuse[to]; e != nil {
		return e
	}
	s.d.to = append(s.d.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.d.data = string(b)
	_, s.d.tls = s.conn.TLSConnectionState()
	s.box.got <- s.d
	return nil
}

func (s *session) Reset()        { s.d = delivery{} } // after each message, and at RSET
func (s *session) Logout() error { return nil }

// startSMTP runs a server on a random port until the test ends. With
// implicit, the listener speaks TLS from the first byte; otherwise the
// server offers STARTTLS.
func startSMTP(t *testing.T, box *mailbox, implicit bool) (port int, roots *x509.CertPool) {
	t.Helper()
	cert, roots := selfSigned(t)
	tc := &tls.Config{Certificates: []tls.Certificate{cert}}
	s := smtp.NewServer(box)
	s.Domain, s.TLSConfig, s.MaxRecipients = "localhost", tc, box.maxRcpt
	var l net.Listener
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = l.Addr().(*net.TCPAddr).Port
	if implicit {
		l = tls.NewListener(l, tc)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })
	return port, roots
}

func config(port int) Config {
	return Config{Host: "127.0.0.1", Port: port, Username: "apollo", Password: "pa55-w0rd",
		From: "Apollo-11 <alerts@example.com>", To: []string{"oncall@example.com", "Li Lei <lilei@example.com>"}, Hello: "apollo.test"}
}

func TestSendsBothPartsOverSTARTTLS(t *testing.T) {
	t.Parallel()
	box := &mailbox{user: "apollo", pass: "pa55-w0rd", got: make(chan delivery, 1)}
	port, roots := startSMTP(t, box, false)
	n, err := New(config(port), notify.NotifierOptions{TLSConfig: &tls.Config{RootCAs: roots}, Clock: apollo.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	// The real templates, in Chinese: the subject must survive encoding.
	d, err := notify.NewDispatcher([]notify.Channel{{Name: "mail", Type: notify.TypeEmail, Notifier: n, Lang: "zh-CN"}},
		notify.Options{Clock: apollo.NewFakeClock(t0), Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Test(context.Background(), "mail"); err != nil {
		t.Fatal(err)
	}
	got := <-box.got
	if !got.tls || got.from != "alerts@example.com" || strings.Join(got.to, ",") != "oncall@example.com,lilei@example.com" {
		t.Fatalf("envelope %+v", got)
	}
	msg, err := netmail.ReadMessage(strings.NewReader(got.data))
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil || subject != "[测试] Apollo-11 通知渠道 mail 测试消息" {
		t.Fatalf("subject %q (raw %q): %v", subject, msg.Header.Get("Subject"), err)
	}
	if from, err := netmail.ParseAddress(msg.Header.Get("From")); err != nil || from.Name != "Apollo-11" || from.Address != "alerts@example.com" {
		t.Fatalf("From %q", msg.Header.Get("From"))
	}
	if to, err := msg.Header.AddressList("To"); err != nil || len(to) != 2 || to[1].Name != "Li Lei" {
		t.Fatalf("To %q", msg.Header.Get("To"))
	}
	if date, err := msg.Header.Date(); err != nil || !date.Equal(t0) {
		t.Fatalf("Date %q", msg.Header.Get("Date"))
	}
	parts := readParts(t, msg)
	if !strings.Contains(parts["text/plain"], "这是 Apollo-11 发往通知渠道“mail”的测试消息。") {
		t.Fatalf("text part:\n%s", parts["text/plain"])
	}
	if html := parts["text/html"]; !strings.Contains(html, "<h2") || !strings.Contains(html, "[测试] Apollo-11 通知渠道 mail 测试消息") {
		t.Fatalf("html part:\n%s", html)
	}
}

// readParts returns the decoded parts of a multipart/alternative message
// by content type.
func readParts(t *testing.T, msg *netmail.Message) map[string]string {
	t.Helper()
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("content type %q: %v", msg.Header.Get("Content-Type"), err)
	}
	parts := map[string]string{}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ct, cp, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		if !strings.EqualFold(cp["charset"], "utf-8") {
			t.Errorf("%s charset %q", ct, cp["charset"])
		}
		// NextPart has already undone quoted-printable; base64 is ours to undo.
		var body io.Reader = p
		if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "base64") {
			body = base64.NewDecoder(base64.StdEncoding, p)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		parts[ct] = strings.ReplaceAll(string(b), "\r\n", "\n")
	}
	return parts
}

func TestImplicitTLS(t *testing.T) {
	t.Parallel()
	box := &mailbox{user: "apollo", pass: "pa55-w0rd", got: make(chan delivery, 1)}
	port, roots := startSMTP(t, box, true)
	cfg := config(port)
	cfg.TLS, cfg.Auth = TLSImplicit, AuthPlain
	n, err := New(cfg, notify.NotifierOptions{TLSConfig: &tls.Config{RootCAs: roots}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Notify(context.Background(), &notify.Message{Title: "Alert", Text: "body"}); err != nil {
		t.Fatal(err)
	}
	if got := <-box.got; !got.tls || !strings.Contains(got.data, "Subject: Alert") {
		t.Fatalf("%+v", got)
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	box := &mailbox{user: "apollo", pass: "other", got: make(chan delivery, 1)}
	port, roots := startSMTP(t, box, false)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	for _, tc := range []struct {
		name      string
		port      int
		roots     *x509.CertPool
		retryable bool
		errPart   string
	}{
		{"wrong password", port, roots, false, "535"},
		{"untrusted certificate", port, nil, false, "certificate"},
		{"connection refused", deadPort, roots, true, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := New(config(tc.port), notify.NotifierOptions{TLSConfig: &tls.Config{RootCAs: tc.roots}})
			if err != nil {
				t.Fatal(err)
			}
			retry, err := n.Notify(context.Background(), &notify.Message{Title: "x", Text: "y"})
			if err == nil || retry != tc.retryable || !strings.Contains(err.Error(), tc.errPart) {
				t.Fatalf("retryable %v, err %v", retry, err)
			}
			if strings.Contains(err.Error(), "pa55-w0rd") {
				t.Fatalf("password in error: %v", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"empty", Config{}, []string{"host: missing SMTP server", "from:", "to: no recipients"}},
		{"modes", Config{Host: "h", TLS: "ssl", Auth: "cram", From: "a@b.c", To: []string{"x"}},
			[]string{"tls: unknown TLS mode ssl", "auth: unknown authentication cram", `to: "x" is not an address`}},
		{"auth without password", Config{Host: "h", Username: "u", From: "a@b.c", To: []string{"d@e.f"}}, []string{"auth: plain authentication needs username and password"}},
		{"login in clear text", Config{Host: "smtp.example.com", TLS: TLSNone, Username: "u", Password: "p", From: "a@b.c", To: []string{"d@e.f"}},
			[]string{"tls: tls: none would send the password for smtp.example.com in clear text"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not say %q", err, w)
				}
			}
		})
	}
	for mode, want := range map[string]int{"": 587, TLSImplicit: 465, TLSNone: 25} {
		if got := (Config{TLS: mode}).port(); got != want {
			t.Errorf("port for %q: %d, want %d", mode, got, want)
		}
	}
	if s := strconv.Quote((Config{Password: "pa55-w0rd"}).Password.LogValue().String()); strings.Contains(s, "pa55") {
		t.Fatal(s)
	}
}

// Two tenants share a mail channel and send hostile text: each mail names
// its tenant, and neither its subject nor its parts carry a link, a
// mention or a tag from the text (the HTML part is escaped on top).
func TestHostileTextIsInert(t *testing.T) {
	t.Parallel()
	box := &mailbox{user: "apollo", pass: "pa55-w0rd", got: make(chan delivery, 2)}
	port, roots := startSMTP(t, box, false)
	n, err := New(config(port), notify.NotifierOptions{TLSConfig: &tls.Config{RootCAs: roots}})
	if err != nil {
		t.Fatal(err)
	}
	ch := notify.Channel{Name: "mail", Type: notify.TypeEmail, Notifier: n, Tenants: []string{notify.AllTenants}}
	notifytest.Deliver(t, ch, notifytest.Hostile("team-a", "mail"), notifytest.Hostile("team-b", "mail"))
	for _, tenant := range []string{"team-a", "team-b"} {
		msg, err := netmail.ReadMessage(strings.NewReader((<-box.got).data))
		if err != nil {
			t.Fatal(err)
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		if err != nil || !strings.HasPrefix(subject, "["+tenant+"] ") {
			t.Fatalf("subject %q: %v", subject, err)
		}
		parts := readParts(t, msg)
		notifytest.CheckInert(t, tenant, subject, parts["text/plain"])
		notifytest.CheckInert(t, tenant, parts["text/html"])
	}
}

// A server that does not offer STARTTLS will not offer it at the next
// try either: the channel asked for it (the default), so the message fails
// at once and says why, rather than holding the lane in retries for
// give_up_after while every later notification waits behind it.
func TestServerWithoutSTARTTLSFailsOnce(t *testing.T) {
	t.Parallel()
	box := &mailbox{got: make(chan delivery, 1)}
	s := smtp.NewServer(box)
	s.Domain, s.AllowInsecureAuth = "localhost", true // no TLSConfig: no STARTTLS in EHLO
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })
	cfg := config(l.Addr().(*net.TCPAddr).Port)
	cfg.Username, cfg.Password = "", ""
	n, err := New(cfg, notify.NotifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	retry, err := n.Notify(context.Background(), &notify.Message{Title: "x", Text: "y"})
	if err == nil || retry || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("retryable %v, err %v; want a failure for good that names STARTTLS", retry, err)
	}
	select {
	case d := <-box.got:
		t.Fatalf("sent in clear text: %+v", d)
	default:
	}
}

// One address the server refuses (a colleague who left: 550 at RCPT TO)
// must not keep the alert from everyone else on the list. The message goes
// to every recipient the server takes, and the attempt fails for good
// naming the refused one, not retried: the others already have it. Only
// when the server takes nobody does a 4xx make the attempt retryable.
func TestRefusedRecipientDoesNotSilenceTheOthers(t *testing.T) {
	t.Parallel()
	gone := &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
	busy := &smtp.SMTPError{Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 1}, Message: "mailbox busy"}
	for _, tc := range []struct {
		name      string
		refuse    map[string]*smtp.SMTPError
		got       []string // who receives it
		retryable bool
		errParts  []string
	}{
		{"one of two gone", map[string]*smtp.SMTPError{"oncall@example.com": gone},
			[]string{"lilei@example.com"}, false, []string{"sent to 1 of 2 recipients", "oncall@example.com", "550", "no such mailbox"}},
		{"one gone one busy", map[string]*smtp.SMTPError{"oncall@example.com": gone, "lilei@example.com": busy},
			nil, true, []string{"oncall@example.com", "550", "lilei@example.com", "450"}},
		{"both gone", map[string]*smtp.SMTPError{"oncall@example.com": gone, "lilei@example.com": gone},
			nil, false, []string{"oncall@example.com", "lilei@example.com", "550"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			box := &mailbox{user: "apollo", pass: "pa55-w0rd", got: make(chan delivery, 1), refuse: tc.refuse}
			port, roots := startSMTP(t, box, false)
			n, err := New(config(port), notify.NotifierOptions{TLSConfig: &tls.Config{RootCAs: roots}})
			if err != nil {
				t.Fatal(err)
			}
			retry, err := n.Notify(context.Background(), &notify.Message{Title: "x", Text: "y"})
			if err == nil || retry != tc.retryable {
				t.Fatalf("retryable %v, err %v; want retryable %v and an error", retry, err, tc.retryable)
			}
			for _, part := range tc.errParts {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %q", err, part)
				}
			}
			var got []string
			select {
			case d := <-box.got:
				got = d.to
				msg, err := netmail.ReadMessage(strings.NewReader(d.data))
				if err != nil {
					t.Fatal(err)
				}
				if to := msg.Header.Get("To"); !strings.Contains(to, "oncall@example.com") || !strings.Contains(to, "lilei@example.com") {
					t.Errorf("To: %q; want every configured recipient listed", to)
				}
			default:
			}
			if strings.Join(got, ",") != strings.Join(tc.got, ",") {
				t.Fatalf("delivered to %q, want %q", got, tc.got)
			}
		})
	}
}

// A server that takes only so many recipients per message answers 452
// "too many recipients" for the rest and expects them in another
// message: every recipient gets the alert, once.
func TestRecipientLimitSendsTheRestInAnotherMessage(t *testing.T) {
	t.Parallel()
	box := &mailbox{user: "apollo", pass: "pa55-w0rd", got: make(chan delivery, 3), maxRcpt: 1}
	port, roots := startSMTP(t, box, false)
	cfg := config(port)
	cfg.To = append(cfg.To, "dba@example.com")
	n, err := New(cfg, notify.NotifierOptions{TLSConfig: &tls.Config{RootCAs: roots}})
	if err != nil {
		t.Fatal(err)
	}
	if retry, err := n.Notify(context.Background(), &notify.Message{Title: "x", Text: "y"}); err != nil {
		t.Fatalf("retryable %v, err %v", retry, err)
	}
	var got []string
	for len(box.got) > 0 {
		got = append(got, (<-box.got).to...)
	}
	if want := "oncall@example.com,lilei@example.com,dba@example.com"; strings.Join(got, ",") != want {
		t.Fatalf("delivered to %q, want each of %s once", got, want)
	}
}
