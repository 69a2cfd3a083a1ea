package console

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
)

func TestWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 10, 2, 3, 0, time.UTC)
	m := &notify.Message{Title: "[FIRING] r", Text: "plain", Markdown: "**md**",
		Notification: apollo.Notification{At: at, Alert: apollo.Alert{Summary: "failed_rate 0.5 > 0.05\nfor batch_"}}}
	for _, tc := range []struct{ name, body, want string }{
		{"", "", "== [FIRING] r ==\nplain\n\n"},
		{"", "markdown", "== [FIRING] r ==\n**md**\n\n"},
		// Several console channels print to one terminal: each message
		// names its channel (issue 21).
		{"dingtalk", "", "== dingtalk: [FIRING] r ==\nplain\n\n"},
		{"dingtalk", "line", "10:02:03 dingtalk: [FIRING] r — failed_rate 0.5 > 0.05 for batch_\n"},
	} {
		var b strings.Builder
		n, err := New(Config{Body: tc.body}, notify.NotifierOptions{Name: tc.name, Output: &b, Location: time.UTC})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Notify(context.Background(), m); err != nil || b.String() != tc.want {
			t.Errorf("%s/%s: %v %q, want %q", tc.name, tc.body, err, b.String(), tc.want)
		}
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestWriteErrorIsPermanent(t *testing.T) {
	t.Parallel()
	n, _ := New(Config{}, notify.NotifierOptions{Output: failing{}})
	if retry, err := n.Notify(context.Background(), &notify.Message{}); err == nil || retry {
		t.Fatalf("%v %v", retry, err)
	}
	if _, err := New(Config{Body: "html"}, notify.NotifierOptions{}); err == nil || !strings.Contains(err.Error(), "body: unknown body html") {
		t.Fatalf("%v", err)
	}
}

// What a reporter chose (a job name, a summary) reaches the terminal with
// its control characters escaped: an ESC would set the window title or
// clear the screen, a bidi override reorder the line. A block keeps the
// body's own line breaks (issue 21).
func TestEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 10, 2, 3, 0, time.UTC)
	m := &notify.Message{Title: "[FIRING] r: x\x1b]0;pwned\a", Text: "job x\x1b[2J\u202e\nline two",
		Notification: apollo.Notification{At: at, Alert: apollo.Alert{Summary: "batch\x1b[31m timeout\r"}}}
	for _, tc := range []struct{ body, want string }{
		{"", "== [FIRING] r: x\\u001b]0;pwned\\u0007 ==\njob x\\u001b[2J\\u202e\nline two\n\n"},
		{"line", "10:02:03 [FIRING] r: x\\u001b]0;pwned\\u0007 — batch\\u001b[31m timeout\n"},
	} {
		var b strings.Builder
		n, err := New(Config{Body: tc.body}, notify.NotifierOptions{Output: &b, Location: time.UTC})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Notify(context.Background(), m); err != nil || b.String() != tc.want {
			t.Errorf("%q: %v\n got %q\nwant %q", tc.body, err, b.String(), tc.want)
		}
	}
}
