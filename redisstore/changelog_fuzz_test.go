package redisstore

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// An entry of the change log is read from Redis, which anyone with its
// address can write: whatever it holds, reading it does not panic, the
// follower's mark only grows within an epoch (a new one forgets), and a
// change is applied only from an entry of the version it knows. A batch
// that reads is applied but for the changes that do not (a status or kind
// of a newer release), which are passed over alone and counted; every
// change applied has a status and kind this release knows.
func FuzzChangeLogEntry(f *testing.F) {
	f.Add("1", "e1", "7", `[{"t":"acme","n":"etl","id":"r1","s":"failed","p":"running","ts":42,"l":7}]`)
	f.Add("1", "e2", strconv.FormatUint(math.MaxUint64, 10), `[{"n":"\u0000","id":"","s":"x","ts":-9223372036854775808,"l":18446744073709551615}]`)
	f.Add("2", "", "1", `[{"n":"etl","id":"r1","s":"failed"}]`)
	f.Add("1", "e1", "-1", `{"not":"a batch"}`)
	f.Add("1", "e1", "8", `[{"t":"acme","n":"etl","id":"r1","s":"failed","p":"running"},{"n":"etl","id":"r2","s":"skipped"},{"n":"etl","id":"r3","s":"running","k":"paused","r":"newer"},{"n":"x","id":"r4","s":"failed","ts":"late"}]`)
	f.Add("1", "e1", "8", `[{"n":"etl","id":"r1","s":"failed","p":"x"},null,{},{"k":""},{"k":null}]`)
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, v, e, m, b string) {
		applied := 0
		forgot := false
		fl := &ChangeFollower{log: quiet, logs: loglimit.New(time.Minute), clock: apollo.SystemClock, apply: func(c *apollo.Change) {
			if !c.Record.Kind.Valid() || !c.Task.Status.Valid() && c.Task.Status != apollo.StatusNone ||
				!c.Prev.Status.Valid() && c.Prev.Status != apollo.StatusNone {
				t.Fatalf("applied a change this release cannot name: %+v", c)
			}
			applied++
		}, forget: func() { forgot = true }}
		fl.mark, fl.epoch = 3, "e1"
		fl.entry(redis.XMessage{ID: "1-1", Values: map[string]any{"v": v, "e": e, "m": m, "b": b}})
		mark, pos := fl.Mark()
		newEpoch := v == changeLogVersion && e != "" && e != "e1"
		if newEpoch != forgot || !newEpoch && mark < 3 || pos != "1-1@"+fl.epoch {
			t.Fatalf("after the entry: mark %d, position %q", mark, pos)
		}
		if v != changeLogVersion && applied != 0 {
			t.Fatalf("%d changes applied from an entry of version %q", applied, v)
		}
		var batch []wireChange
		if v != changeLogVersion || json.Unmarshal([]byte(b), &batch) != nil {
			batch = nil
		}
		unread := 0
		for _, w := range batch {
			if w.skip != "" {
				unread++
			}
		}
		if passed := int(fl.Stats().PassedOver); passed != unread || applied != len(batch)-unread {
			t.Fatalf("of %d changes (%d that do not read), %d applied and %d passed over", len(batch), unread, applied, passed)
		}
	})
}
