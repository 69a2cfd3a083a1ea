package console

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/notify"
)

func TestWrites(t *testing.T) {
	t.Parallel()
	m := &notify.Message{Title: "[FIRING] r", Text: "plain", Markdown: "**md**"}
	for _, tc := range []struct{ body, want string }{
		{"", "== [FIRING] r ==\nplain\n\n"},
		{"markdown", "== [FIRING] r ==\n**md**\n\n"},
	} {
		var b strings.Builder
		n, err := New(Config{Body: tc.body}, notify.NotifierOptions{Output: &b})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Notify(context.Background(), m); err != nil || b.String() != tc.want {
			t.Fatalf("%v %q", err, b.String())
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
