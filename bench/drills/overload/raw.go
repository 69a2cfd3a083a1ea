package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
)

// rawSender posts batches of whole runs and resends every event that was
// not acknowledged at once, ignoring 429 and Retry-After: the client that
// does not back off.
type rawSender struct {
	url       string
	rec       *recorder
	requests  atomic.Int64
	tooMany   atomic.Int64
	resent    atomic.Int64
	attempted atomic.Int64 // events posted, resends included
	err       atomic.Value
}

type rawEvent struct {
	TaskID   string `json:"taskID"`
	Name     string `json:"name"`
	Sequence int64  `json:"sequence"`
	Status   string `json:"status"`
	Ts       int64  `json:"ts"`
}

const runsPerBatch = 33

// run sends about perSec events a second until ctx ends, then finishes
// the batch it holds.
func (s *rawSender) run(ctx context.Context, g int, perSec float64) {
	client := &http.Client{Timeout: 30 * time.Second}
	pace := time.NewTicker(time.Duration(float64(time.Second) * 3 * runsPerBatch / perSec))
	defer pace.Stop()
	for b := 0; ctx.Err() == nil; b++ {
		var pending []rawEvent
		runs := make([]run, runsPerBatch)
		now := time.Now().UnixMilli()
		for i := range runs {
			runs[i] = run{ID: fmt.Sprintf("ovl-r%d-%d-%d", g, b, i), Job: fmt.Sprintf("ovl_raw_%d", g), Events: 3, Final: apollo.StatusSuccess}
			last := "success"
			if i%4 == 0 {
				last, runs[i].Final = "failed", apollo.StatusFailed
			}
			for seq, st := range []string{"pending", "running", last} {
				pending = append(pending, rawEvent{runs[i].ID, runs[i].Job, int64(seq + 1), st, now + int64(seq)})
			}
		}
		for first := true; len(pending) > 0; first = false {
			if !first {
				s.resent.Add(int64(len(pending)))
			}
			var err error
			if pending, err = s.post(client, pending); err != nil {
				s.err.CompareAndSwap(nil, err)
				return
			}
		}
		for _, rn := range runs {
			s.rec.add(rn)
		}
		select {
		case <-pace.C:
		case <-ctx.Done():
		}
	}
}

// post sends evs once and returns those still to resend.
func (s *rawSender) post(client *http.Client, evs []rawEvent) ([]rawEvent, error) {
	body, _ := json.Marshal(evs)
	s.requests.Add(1)
	s.attempted.Add(int64(len(evs)))
	resp, err := client.Post(s.url, "application/json", bytes.NewReader(body))
	if err != nil {
		return evs, nil // the server is busy: resend, at once
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusTooManyRequests {
		s.tooMany.Add(1)
	} else if resp.StatusCode != 200 {
		return nil, fmt.Errorf("raw sender: status %d: %s", resp.StatusCode, b)
	}
	var ans struct {
		Results []struct {
			Result string
			Error  *apollo.Error
		}
	}
	if json.Unmarshal(b, &ans) != nil || len(ans.Results) != len(evs) {
		if resp.StatusCode == 200 {
			return nil, fmt.Errorf("raw sender: 200 with %d results for %d events: %s", len(ans.Results), len(evs), b)
		}
		return evs, nil // refused as a whole
	}
	var again []rawEvent
	for i, r := range ans.Results {
		switch r.Result {
		case "accepted", "held", "duplicate":
		case "retry_later":
			again = append(again, evs[i])
		default:
			return nil, fmt.Errorf("raw sender: event %+v answered %s: %v", evs[i], r.Result, r.Error)
		}
	}
	return again, nil
}
