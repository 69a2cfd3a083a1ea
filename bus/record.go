package bus

import (
	"fmt"

	"github.com/apollo-11/apollo"
)

// DecodeRecord decodes one write-ahead log record as the bus wrote it, for
// tools that read a stopped server's log (wal.Log.Replay gives the
// payloads): the crash drill recounts the log with it. The payload must be
// exactly one record.
func DecodeRecord(payload []byte) (apollo.Record, error) {
	var r apollo.Record
	rest, err := decodeRecord(payload, &r)
	if err != nil {
		return r, err
	}
	if len(rest) != 0 {
		return r, fmt.Errorf("bus: %d bytes after the record", len(rest))
	}
	return r, nil
}
