package agent_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
)

// startServer stands in for a running `apollo server` in these examples.
func startServer() *agent.TestServer { return agent.StartTestServer() }

// A client reports runs; Close delivers what is buffered before the
// process exits.
func ExampleClient() {
	srv := startServer()
	defer srv.Close()

	c, err := agent.New(srv.URL(), agent.WithToken("executor-token"))
	if err != nil {
		log.Fatal(err)
	}
	run := c.Task("backup-2024-06-01", "nightly_backup")
	run.Running(agent.TimeoutAfter(time.Hour))
	run.Succeed(agent.Cost(42*time.Minute), agent.Extra(map[string]any{"bytes": 1 << 30}))

	if err := c.Close(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Join(srv.Stored(), "\n"))
	st := c.Stats()
	fmt.Printf("accepted %d, rejected %d, buffered %d\n", st.Accepted, st.Rejected, st.Buffered)
	// Output:
	// backup-2024-06-01 #1 running
	// backup-2024-06-01 #2 success
	// accepted 2, rejected 0, buffered 0
}

// A Task numbers a run's events and refuses, at the call, a step the
// server would reject.
func ExampleTask() {
	srv := startServer()
	defer srv.Close()
	c, err := agent.New(srv.URL())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())

	due := time.Date(2024, 6, 1, 3, 0, 0, 0, time.UTC)
	run := c.Task("import-2024-06-01T03", "hourly_import")
	run.Pending(agent.ScheduledAt(due))
	if err := run.Succeed(); err != nil {
		fmt.Println("refused:", apollo.ErrorCode(err))
	}
	run.Running()
	run.Fail(agent.Extra(map[string]any{"exitCode": 3}))

	if err := c.Flush(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Join(srv.Stored(), "\n"))
	// Output:
	// refused: conflict
	// import-2024-06-01T03 #1 pending
	// import-2024-06-01T03 #2 running
	// import-2024-06-01T03 #3 failed
}

// Send reports an event whose sequence the caller keeps, for executors
// that already number their steps.
func ExampleClient_Send() {
	srv := startServer()
	defer srv.Close()
	c, err := agent.New(srv.URL())
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now().UnixMilli()
	c.Send(apollo.Event{TaskID: "job-7", Name: "etl", Sequence: 1, Status: apollo.StatusRunning, Ts: now})
	c.Send(apollo.Event{TaskID: "job-7", Name: "etl", Sequence: 1, Status: apollo.StatusRunning, Ts: now})
	err = c.Send(apollo.Event{TaskID: "job-7", Name: "etl", Status: apollo.StatusSuccess, Ts: now})
	fmt.Println(err)

	c.Close(context.Background())
	st := c.Stats()
	fmt.Printf("accepted %d, duplicate %d\n", st.Accepted, st.Duplicate)
	err = c.Send(apollo.Event{TaskID: "job-7", Sequence: 2, Status: apollo.StatusSuccess, Ts: now})
	fmt.Println("after Close:", errors.Is(err, agent.ErrClosed))
	// Output:
	// sequence: 0 is below 1 (number each task's events 1, 2, 3, ...)
	// accepted 1, duplicate 1
	// after Close: true
}
