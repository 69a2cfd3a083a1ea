package apiclient_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/metrics"
)

func ExampleNew() {
	srv := exampleServer()
	defer srv.Close()

	c, err := apiclient.New(srv.URL, apiclient.WithToken("the token, when the server has tokens"),
		apiclient.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}))
	if err != nil {
		panic(err)
	}
	h, err := c.Health(context.Background())
	fmt.Println(h.Status, err)
	// Output: ok <nil>
}

func ExampleClient_Tasks() {
	srv := exampleServer()
	defer srv.Close()
	c, _ := apiclient.New(srv.URL)

	// Two tasks a page, following Next to the end.
	q := apiclient.TaskQuery{Prefix: "nightly_", Limit: 2}
	for {
		page, err := c.Tasks(context.Background(), q)
		if err != nil {
			panic(err)
		}
		for _, t := range page.Tasks {
			fmt.Println(t.TaskID, t.Status)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	// Output:
	// nightly_report-2 running
	// nightly_backup-1 failed
	// nightly_backup-0 success
}

func ExampleClient_Task() {
	srv := exampleServer()
	defer srv.Close()
	c, _ := apiclient.New(srv.URL)

	t, err := c.Task(context.Background(), "nightly_backup-1")
	fmt.Println(t.Name, t.Status, len(t.History), "records", err)

	// An error answer reads back as the server's *apollo.Error.
	_, err = c.Task(context.Background(), "no-such-task")
	var ae *apollo.Error
	fmt.Println(apollo.ErrorCode(err), errors.As(err, &ae) && ae.Field == "taskID")
	// Output:
	// nightly_backup failed 2 records <nil>
	// not_found true
}

func ExampleClient_Metrics() {
	srv := exampleServer()
	defer srv.Close()
	c, _ := apiclient.New(srv.URL)

	page, err := c.Metrics(context.Background(), time.Hour, "nightly_")
	if err != nil {
		panic(err)
	}
	for _, j := range page.Jobs {
		fmt.Printf("%s: %d finished, %d failed (%.0f%%), %d running\n", j.Name, j.Count, j.Failed, 100*j.FailedRate, j.Running)
	}
	// Output:
	// nightly_backup: 2 finished, 1 failed (50%), 0 running
	// nightly_report: 0 finished, 0 failed (0%), 1 running
}

func ExampleClient_AddSilence() {
	srv := exampleServer()
	defer srv.Close()
	c, _ := apiclient.New(srv.URL)

	s, err := c.AddSilence(context.Background(), apiclient.SilenceRequest{
		Prefix: "nightly_", Duration: "2h", Comment: "storage maintenance, ticket OPS-7"})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Prefix, "until", s.EndsAt.Format(time.RFC3339), "by", s.CreatedBy)

	// A silence that matches nothing in particular is refused, and says
	// which field to fix.
	_, err = c.AddSilence(context.Background(), apiclient.SilenceRequest{Duration: "2h", Comment: "everything"})
	var ae *apollo.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.Code, ae.Field)
	}
	// Output:
	// nightly_ until 2030-01-01T14:00:00Z by local
	// invalid rule
}

func ExampleDecodeFrame() {
	f, err := apiclient.DecodeFrame([]byte(`{"type":"tasks","cursor":"c.9","tasks":[{"taskID":"etl-1","status":"running","sequence":1,"updatedAt":1}]}`))
	if err != nil {
		panic(err)
	}
	switch m := f.Msg.(type) {
	case *apiclient.Tasks:
		for _, t := range m.Tasks {
			fmt.Println(f.Type, t.TaskID, t.Status)
		}
	case *apiclient.AlertChange:
		fmt.Println(f.Type, m.Alert.ID)
	}
	// Output: tasks etl-1 running
}

// exampleServer is the API that "apollo server" serves, over an in-memory
// bus, its metrics and an alert engine, on a clock stopped at
// 2030-01-01 12:00 UTC, with three runs of two jobs reported in the
// seconds before.
func exampleServer() *server {
	clock := apollo.NewFakeClock(time.Date(2030, 1, 1, 11, 59, 57, 0, time.UTC))
	log := slog.New(slog.DiscardHandler)
	agg, err := metrics.New(metrics.Options{Clock: clock, Logger: log})
	if err != nil {
		panic(err)
	}
	eng, err := alert.New(alert.Options{Store: agg, Sender: noSender{}, Clock: clock, Logger: log})
	if err != nil {
		panic(err)
	}
	b, err := bus.New(bus.Options{Observers: []bus.Observer{agg, eng}, Clock: clock, Logger: log, Workers: 1})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := b.Start(ctx); err != nil {
		panic(err)
	}
	// The runs, one a second up to noon.
	for _, run := range [][]apollo.Event{
		{{TaskID: "nightly_backup-0", Name: "nightly_backup", Sequence: 1, Status: apollo.StatusRunning},
			{TaskID: "nightly_backup-0", Sequence: 2, Status: apollo.StatusSuccess}},
		{{TaskID: "nightly_backup-1", Name: "nightly_backup", Sequence: 1, Status: apollo.StatusRunning},
			{TaskID: "nightly_backup-1", Sequence: 2, Status: apollo.StatusFailed}},
		{{TaskID: "nightly_report-2", Name: "nightly_report", Sequence: 1, Status: apollo.StatusRunning}},
	} {
		clock.Advance(time.Second)
		for i := range run {
			run[i].Ts = clock.Now().UnixMilli()
		}
		if err := b.Publish(ctx, run, make([]bus.Outcome, len(run))); err != nil {
			panic(err)
		}
	}
	if err := b.WaitDrained(ctx); err != nil { // the metrics have seen every change
		panic(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Bus: b, Metrics: agg, Alerts: eng, Clock: clock, Logger: log}))
	return &server{Server: srv, bus: b}
}

// server is an example's server; Close stops it and its bus.
type server struct {
	*httptest.Server
	bus *bus.Bus
}

func (s *server) Close() {
	s.Server.Close()
	s.bus.Stop(context.Background())
}

type noSender struct{}

func (noSender) Send(apollo.Notification) {}
