package main

import "testing"

// endToEnd skips t with -short and runs it beside the other tests: each
// deployment has its own processes, data directory, Redis prefix and
// webhook.
func endToEnd(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
}

// startDeployment makes a deployment that sends to h (newDeployment),
// starts it and waits until it is ready, and logs the end of each of its
// processes' logs if t fails.
func startDeployment(t *testing.T, three bool, h *hook, opts deployOptions) *deployment {
	t.Helper()
	d := newDeployment(t, three, h, opts)
	d.start()
	t.Cleanup(d.logOnFailure)
	return d
}

// startThreeProcesses is an end-to-end test's start of the three-process
// mode: the bus and one alert process around the test Redis, under a
// prefix of their own, sending to a new webhook.
func startThreeProcesses(t *testing.T, opts deployOptions) (*deployment, *hook) {
	t.Helper()
	endToEnd(t)
	h := newHook(t)
	return startDeployment(t, true, h, opts), h
}
