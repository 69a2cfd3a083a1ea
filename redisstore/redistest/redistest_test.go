package redistest_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// endingTB is a test whose end the test under it plays: it keeps the
// cleanups and the failures instead of running and reporting them.
type endingTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	failures []string
}

func (e *endingTB) Cleanup(f func()) { e.cleanups = append(e.cleanups, f) }

func (e *endingTB) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failures = append(e.failures, fmt.Sprintf(format, args...))
}

// end runs the cleanups, the last registered first, as a test's end does.
func (e *endingTB) end() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

// A process killed with SIGKILL has sent Redis writes that Redis has not
// run yet (here: a SET queued behind a WAIT no replica answers, on a
// connection named by URLFor). The end of the test cuts that connection
// before it deletes the keys: the SET never runs, and nothing is left
// under the prefix. Before, the keys were deleted first, Redis ran the
// dead process's writes after, and they stayed in the test database.
func TestWritesOfAKilledProcessDoNotOutliveTheTest(t *testing.T) {
	tb := &endingTB{TB: t}
	_, prefix := redistest.Client(tb)
	opts, err := redis.ParseURL(redistest.URLFor(t, prefix))
	if err != nil {
		t.Fatal(err)
	}
	if opts.ClientName != prefix {
		t.Fatalf("URLFor names the connections %q, want %q", opts.ClientName, prefix)
	}
	check, _ := redistest.Client(t) // reads after the other's end
	ctx := testwait.Context(t)
	t.Cleanup(func() { redistest.Delete(context.Background(), check, prefix) }) // what a failure left

	conn, err := net.Dial("tcp", opts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(args ...string) {
		t.Helper()
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := conn.Write([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
	}
	replies := bufio.NewReader(conn)
	send("SELECT", fmt.Sprint(opts.DB))
	send("CLIENT", "SETNAME", prefix)
	send("SET", prefix+":before", "1")
	for range 3 {
		if line, err := replies.ReadString('\n'); err != nil || line != "+OK\r\n" {
			t.Fatalf("setting up the process's connection: %q, %v", line, err)
		}
	}
	send("WAIT", "1", "0")
	send("SET", prefix+":late", "1")
	var id int64
	for id == 0 {
		list, err := check.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(list) {
			if strings.Contains(line, " name="+prefix+" ") && strings.Contains(line, " cmd=wait ") {
				fmt.Sscanf(line, "id=%d", &id)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the process's connection never waited")
		case <-time.After(10 * time.Millisecond): // polling CLIENT LIST
		}
	}

	tb.end()
	// Redis gets to the rest of what the process sent, if it still can.
	if err := check.ClientUnblock(ctx, id).Err(); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := replies.ReadString('\n')
		if err != nil || line == "+OK\r\n" { // cut, or the late SET ran
			break
		}
	}
	if len(tb.failures) > 0 {
		t.Fatalf("the test's end failed it: %v", tb.failures)
	}
	if keys, err := redistest.Keys(ctx, check, prefix); err != nil || len(keys) > 0 {
		t.Fatalf("keys under the prefix after the test's end: %v (%v)", keys, err)
	}
}
