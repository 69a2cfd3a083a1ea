package sched

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	apollo "github.com/apollo-11/apollo"
)

func TestTail(t *testing.T) {
	t.Parallel()
	many := strings.Repeat("a line\n", 30)
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"empty", nil, ""},
		{"short", []string{"hello\n", "world\n"}, "hello\nworld\n"},
		{"no final newline", []string{"a\nb"}, "a\nb"},
		{"last 20 lines", []string{many}, strings.Repeat("a line\n", 20)},
		{"last 2 KiB of one long line", []string{strings.Repeat("x", 5000) + "END"}, strings.Repeat("x", tailBytes-3) + "END"},
		{"wraps across writes", []string{strings.Repeat("y", 2000), strings.Repeat("z", 100)}, strings.Repeat("y", tailBytes-100) + strings.Repeat("z", 100)},
		{"starts on a whole character", []string{strings.Repeat("é", 1500)}, strings.Repeat("é", tailBytes/2)},
		{"invalid bytes replaced", []string{"ok\xff\n"}, "ok\uFFFD\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var tl tail
			for _, w := range tc.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := tl.String(); got != tc.want {
				t.Errorf("got %d bytes %.60q..., want %d bytes %.60q...", len(got), got, len(tc.want), tc.want)
			}
		})
	}
}

func TestEncodeExtraFitsTheLimit(t *testing.T) {
	t.Parallel()
	// Control characters take six bytes each in JSON: 2 KiB of them per
	// stream would be 24 KiB of extra unless cut.
	noisy := strings.Repeat("\x01\x02\x03\x04\x05\x06\x07\n", tailBytes/8)
	b := encodeExtra(map[string]any{"attempt": 1, "exitCode": 2}, noisy, noisy)
	if len(b) > apollo.MaxExtraBytes {
		t.Fatalf("extra is %d bytes", len(b))
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out, _ := m["stdoutTail"].(string)
	if out == "" || !strings.HasSuffix(noisy, out) || m["exitCode"] != 2.0 {
		t.Errorf("extra %s", b)
	}
	// HTML is not escaped: '<' stays one byte.
	if b := encodeExtra(map[string]any{}, "<a>", ""); string(b) != `{"stdoutTail":"<a>"}` {
		t.Errorf("got %s", b)
	}
	if s := cutFront(strings.Repeat("é", 10)); !utf8.ValidString(s) || len(s) >= 20 {
		t.Errorf("cutFront = %q", s)
	}
	// An error naming a long path (control characters and all), with the
	// tails or without: cut in its middle, its start and reason kept.
	long := "fork/exec /" + strings.Repeat("é\x01", 3000) + ": no such file or directory"
	for _, tail := range []string{"", noisy} {
		b := encodeExtra(map[string]any{"exitCode": 127, "error": long}, tail, "")
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil || len(b) > apollo.MaxExtraBytes {
			t.Fatalf("%d bytes, %v", len(b), err)
		}
		e, _ := m["error"].(string)
		if !utf8.ValidString(e) || !strings.HasPrefix(e, "fork/exec /é") || !strings.HasSuffix(e, ": no such file or directory") || m["exitCode"] != 127.0 {
			t.Errorf("extra %.200s", b)
		}
	}
}
