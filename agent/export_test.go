package agent

import "fmt"

// TestServer exposes the protocol test server to the examples in package
// agent_test. It exists only in the test binary.
type TestServer struct{ s *protocolServer }

func StartTestServer() *TestServer { return &TestServer{startProtocolServer()} }

func (ts *TestServer) URL() string { return ts.s.URL() }

func (ts *TestServer) Close() { ts.s.close() }

// Stored lists the events the server applied, one "taskID #sequence status"
// line each, in the order it applied them.
func (ts *TestServer) Stored() []string {
	ts.s.mu.Lock()
	defer ts.s.mu.Unlock()
	var out []string
	for _, e := range ts.s.stored {
		out = append(out, fmt.Sprintf("%s #%d %s", e.TaskID, e.Sequence, e.Status))
	}
	return out
}
