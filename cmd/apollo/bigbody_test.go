package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
)

// bigHook is a receiver for a webhook whose template writes a line
// "TOLD tenant/group" for each notification a request carries. Like
// nginx with its default client_max_body_size, it refuses a body over
// 1 MiB with 413; it counts those, and the largest body it was sent.
type bigHook struct {
	srv     *httptest.Server
	told    chan string
	refused atomic.Int64
	largest atomic.Int64
}

func newBigHook(t *testing.T) *bigHook {
	h := &bigHook{told: make(chan string, 10000)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if n := int64(len(b)); n > h.largest.Load() {
			h.largest.Store(n)
		}
		if len(b) > 1<<20 {
			h.refused.Add(1)
			http.Error(w, "413 Request Entity Too Large", http.StatusRequestEntityTooLarge)
			return
		}
		for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
			if told, ok := strings.CutPrefix(sc.Text(), "TOLD "); ok {
				h.told <- told
			}
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// A webhook's template that writes a large field for every notification
// a digest carries (here the text of all of them, for each: a body that
// grows with the square of the digest) must not make a body its receiver
// refuses. Two tenants' storms of 60 jobs each reach a webhook allowed 60
// requests a minute whose receiver refuses a body over 1 MiB, beside the
// standard webhook: the digests are cut to what fits in 1 MiB, and each
// of the 120 notifications reaches both receivers once. Before, the
// digest listed 100 notifications in a body of about 4 MiB: the receiver
// refused it (413, not retried) and those 100 were told to nobody there.
func TestWebhookDigestBodyFitsInOneMiB(t *testing.T) {
	const jobs = 60
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h, big := newHook(t), newBigHook(t)
	bigChannel := fmt.Sprintf(`  big:
    type: webhook
    url: %s
    tenants: ["*"]
    rate_per_minute: 60
    headers:
      Content-Type: text/plain
    template: |
      {{range .Digest}}TOLD {{.Notification.Alert.Tenant}}/{{.Notification.Alert.Group}}
      {{else}}TOLD {{.Notification.Alert.Tenant}}/{{.Notification.Alert.Group}}
      {{end}}{{range .Digest}}{{range $.Digest}}{{.Text}}{{end}}{{end}}
`, big.srv.URL)
	d := newDeployment(t, false, h, deployOptions{hook: bigChannel, repeat: "1h"})
	d.start()
	t.Cleanup(d.logOnFailure)
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_each task_prefix: "%[1]s_job" BY: name WINDOW: 5m THRESHOLD: failed >= 1 NOTIFY: hook, big`+"\n", tenant), nil, 200)
	}
	for _, tenant := range tenants {
		d.stormEach(tenant, jobs)
	}
	want := len(tenants) * jobs
	got := map[string]int{}
	deadline := time.After(time.Minute + testwait.Timeout(t))
	for len(got) < want {
		select {
		case told := <-big.told:
			if got[told]++; got[told] > 1 {
				t.Errorf("%s told twice", told)
			}
		case <-deadline:
			t.Fatalf("the big webhook was told %d of the %d notifications; it refused %d bodies, the largest %d bytes",
				len(got), want, big.refused.Load(), big.largest.Load())
		}
	}
	if n := big.refused.Load(); n != 0 {
		t.Errorf("the receiver refused %d bodies over 1 MiB (the largest %d bytes)", n, big.largest.Load())
	}
	std := map[string]bool{}
	for len(std) < want {
		p := h.await(t, time.Minute, "the standard webhook's notifications", func(webhook.ApolloPayload) bool { return true })
		for _, n := range append(p.Notifications, p.Notification) {
			if n.Alert.Tenant != "" {
				std[n.Alert.Tenant+"/"+n.Alert.Group] = true
			}
		}
	}
}
