package redisstore

import (
	"math"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
)

// An entry of the change log is read from Redis, which anyone with its
// address can write: whatever it holds, reading it does not panic, the
// follower's mark only grows, and a change is applied only from an entry
// of the version it knows.
func FuzzChangeLogEntry(f *testing.F) {
	f.Add("1", "7", `[{"t":"acme","n":"etl","id":"r1","s":"failed","p":"running","ts":42,"l":7}]`)
	f.Add("1", strconv.FormatUint(math.MaxUint64, 10), `[{"n":"\u0000","id":"","s":"x","ts":-9223372036854775808,"l":18446744073709551615}]`)
	f.Add("2", "1", `[{"n":"etl","id":"r1","s":"failed"}]`)
	f.Add("1", "-1", `{"not":"a batch"}`)
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, v, m, b string) {
		applied := 0
		fl := &ChangeFollower{log: quiet, apply: func(*apollo.Change) { applied++ }}
		fl.mark = 3
		fl.entry(redis.XMessage{ID: "1-1", Values: map[string]any{"v": v, "m": m, "b": b}})
		mark, pos := fl.Mark()
		if mark < 3 || pos != "1-1" {
			t.Fatalf("after the entry: mark %d, position %q", mark, pos)
		}
		if v != changeLogVersion && applied != 0 {
			t.Fatalf("%d changes applied from an entry of version %q", applied, v)
		}
	})
}
