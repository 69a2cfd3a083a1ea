package notify_test

import (
	"path/filepath"
	"testing"

	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/outboxtest"
)

// The file outbox passes the suite: each case has its own file, a stop
// and a crash both close it (every entry owed is synced when Owe
// returns).
func TestFileOutboxConformance(t *testing.T) {
	t.Parallel()
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		path := filepath.Join(t.TempDir(), "outbox.jsonl")
		end := func(t *testing.T, o notify.Outbox) {
			if err := o.(*notify.FileOutbox).Close(); err != nil {
				t.Fatal(err)
			}
		}
		return outboxtest.Harness{
			Open: func(t *testing.T) notify.Outbox {
				o, err := notify.OpenFileOutbox(path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { o.Close() })
				return o
			},
			Stop:  end,
			Crash: end,
		}
	})
}
