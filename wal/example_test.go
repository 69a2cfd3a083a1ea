package wal_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/apollo-11/apollo/wal"
)

// The bus's life with the log: recover from the newest snapshot plus the
// records after it, then append, acknowledge once durable, and snapshot now
// and then so that recovery stays short.
func Example() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	l, err := wal.Open(wal.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	for _, event := range []string{`{"taskID":"a","sequence":1}`, `{"taskID":"a","sequence":2}`} {
		lsn, err := l.Append([]byte(event))
		if err != nil {
			log.Fatal(err)
		}
		if err := l.Wait(ctx, lsn); err != nil { // only now answer the client
			log.Fatal(err)
		}
	}
	err = l.WriteSnapshot(1, func(w io.Writer) error {
		_, err := io.WriteString(w, "state after event 1")
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	l.Close()

	// Recovery, as at start-up.
	l, err = wal.Open(wal.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	lsn, body, err := l.LatestSnapshot()
	if err != nil {
		log.Fatal(err)
	}
	state, _ := io.ReadAll(body)
	body.Close()
	fmt.Printf("snapshot at %d: %s\n", lsn, state)
	err = l.Replay(lsn, func(lsn wal.LSN, payload []byte) error {
		fmt.Printf("replay %d: %s\n", lsn, payload)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// snapshot at 1: state after event 1
	// replay 2: {"taskID":"a","sequence":2}
}
