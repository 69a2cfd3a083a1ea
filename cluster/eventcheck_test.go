package cluster

import (
	"encoding/json"
	"testing"

	"github.com/apollo-11/apollo"
)

// Whatever extra an event read from the stream carries, an event
// checkEvent keeps has one that the answers between nodes encode and the
// asker reads back as it was: a JSON object, or none.
func FuzzCheckEventExtra(f *testing.F) {
	for _, x := range []string{"", "null", `{}`, `{"a":[1,{"b":"\u2028"}]}`, `{"a":`, `[1]`, `"s"`, "{\"s\":\"\xff\"}", ` {}`, `{} x`, "{\"\\ud800\":1}"} {
		f.Add([]byte(x))
	}
	f.Fuzz(func(t *testing.T, x []byte) {
		ev := apollo.Event{TaskID: "t", Sequence: 1, Status: apollo.StatusRunning, Ts: 1_764_547_200_000, Extra: x}
		if checkEvent(&ev) != nil {
			return
		}
		if len(ev.Extra) == 0 {
			return
		}
		if ev.Extra[0] != '{' {
			t.Fatalf("extra %q kept: not an object", ev.Extra)
		}
		r := rpcReply{Task: &apollo.Task{TaskID: "t", History: []apollo.Record{{Event: ev}}}}
		data := marshalReply(&r)
		var back struct {
			Task struct {
				History []struct {
					Extra json.RawMessage `json:"extra"`
				} `json:"history"`
			} `json:"task"`
		}
		if err := json.Unmarshal(data, &back); err != nil || len(back.Task.History) != 1 || len(back.Task.History[0].Extra) == 0 {
			t.Fatalf("extra %q kept, and its answer %q does not read back: %v", x, data, err)
		}
	})
}
