package agent

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// appendEvent appends ev's wire JSON to dst. It writes what encoding/json
// writes for apollo.Event, less the reflection: reporting is the SDK's hot
// path (BenchmarkEncodeEvent compares the two). ev must have passed
// Validate. Extra is checked and compacted: the spool keeps one event per
// line.
func appendEvent(dst []byte, ev *apollo.Event) ([]byte, error) {
	dst = append(dst, `{"taskID":`...)
	dst = appendString(dst, ev.TaskID)
	if ev.Name != "" {
		dst = append(dst, `,"name":`...)
		dst = appendString(dst, ev.Name)
	}
	dst = append(dst, `,"sequence":`...)
	dst = strconv.AppendInt(dst, ev.Sequence, 10)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, ev.Status.String()...)
	dst = append(dst, `","ts":`...)
	dst = strconv.AppendInt(dst, ev.Ts, 10)
	dst = appendIntField(dst, `,"scheduledAt":`, ev.ScheduledAt)
	dst = appendIntField(dst, `,"timeoutMs":`, ev.TimeoutMs)
	dst = appendIntField(dst, `,"costMs":`, ev.CostMs)
	if len(ev.Extra) > 0 {
		dst = append(dst, `,"extra":`...)
		switch {
		case !json.Valid(ev.Extra):
			return nil, &apollo.Error{Code: apollo.EINVALID, Field: "extra", Message: "not valid JSON"}
		case !bytes.ContainsAny(ev.Extra, " \t\r\n"):
			dst = append(dst, ev.Extra...)
		default:
			// Compact: a raw newline would split the event in the spool.
			buf := bytes.NewBuffer(dst)
			json.Compact(buf, ev.Extra) // valid, so it cannot fail
			dst = buf.Bytes()
		}
	}
	return append(dst, '}'), nil
}

func appendIntField(dst []byte, key string, v int64) []byte {
	if v == 0 {
		return dst
	}
	return strconv.AppendInt(append(dst, key...), v, 10)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD as encoding/json
// does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		if b >= 0x20 && b != '"' && b != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
