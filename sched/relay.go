package sched

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// Sizes of what a relay holds: chunks of one pipe read, a few of them in
// flight to the writer while the process runs, and what is left in the
// pipes when the process group is gone (a pipe holds 64 KiB, at most
// 1 MiB unless root raised the limit).
const (
	relayChunk    = 32 << 10
	relayInFlight = 4
	maxBacklog    = 1 << 20
)

// relay passes one output stream of a process on to a writer (apollo
// exec's terminal, or whatever reads its output) from a goroutine of its
// own, so that the stream is read, and the run's tails kept, apart from
// the pace of that writer's reader.
//
// While the process runs, a reader that does not keep up holds it back,
// through the few chunks in flight, as it would without apollo exec in
// between: what is read but not passed on stays bounded. Once the process
// group is gone (gone is closed), what is still in the pipe is read at
// once, into the tail and a backlog the writer passes on after the
// chunks: the end of the run is the end of its process, not the moment a
// stalled reader takes the last of its output. Before, the reading waited
// on each write, and a pager or a stuck log shipper kept a finished run
// unreported for as long as it stalled.
type relay struct {
	w      io.Writer
	src    *os.File // the read end of the stream's pipe
	gone   <-chan struct{}
	chunks chan []byte
	free   chan []byte
	passed chan struct{} // closed when everything read is passed on or given up on

	// The reading goroutine's until it closes chunks; the writer's after.
	backlog [][]byte
	kept    int
	dropped int64 // bytes not passed on: over maxBacklog after gone

	failed bool // the writing goroutine's: w failed, and gets nothing more
}

func newRelay(w io.Writer, src *os.File, gone <-chan struct{}) *relay {
	rl := &relay{w: w, src: src, gone: gone, chunks: make(chan []byte, relayInFlight),
		free: make(chan []byte, relayInFlight+1), passed: make(chan struct{})}
	go rl.pass()
	return rl
}

// read reads the stream to its end (EOF, the read deadline, or src closed
// by pass), keeping the tail, and hands every chunk to pass.
func (rl *relay) read(t *tail) {
	defer close(rl.chunks)
	for {
		var b []byte
		select {
		case b = <-rl.free:
		default:
			b = make([]byte, relayChunk)
		}
		n, err := rl.src.Read(b)
		if n > 0 {
			t.Write(b[:n])
			rl.put(b[:n])
		}
		if err != nil {
			return
		}
	}
}

// put hands b to pass: waiting for room while the process runs, into the
// backlog once it is gone and pass is behind.
func (rl *relay) put(b []byte) {
	if len(rl.backlog) == 0 { // once there is a backlog, order puts the rest after it
		select {
		case rl.chunks <- b:
			return
		case <-rl.gone:
		}
		select {
		case rl.chunks <- b:
			return
		default:
		}
	}
	if rl.kept+len(b) > maxBacklog {
		// Only a process that left the group (setsid) writes after the
		// group is gone: what it writes past this is not passed on.
		rl.dropped += int64(len(b))
		return
	}
	rl.backlog = append(rl.backlog, b)
	rl.kept += len(b)
}

// pass writes the chunks, then the backlog, to w.
func (rl *relay) pass() {
	defer close(rl.passed)
	for b := range rl.chunks {
		rl.write(b)
		select {
		case rl.free <- b[:cap(b)]:
		default:
		}
	}
	for _, b := range rl.backlog {
		rl.write(b)
	}
	rl.backlog = nil
}

// write passes b on. A failing writer (a closed terminal, a full disk) is
// given up on rather than stopping the reading, which would leave the
// process blocked on a full pipe. A pipe whose reader went away (apollo
// exec ... | head) is the exception: the stream's pipe is closed, so that
// the process meets the broken pipe as it would with nothing between it
// and its reader, instead of being read for ever.
func (rl *relay) write(b []byte) {
	if rl.failed {
		return
	}
	if _, err := rl.w.Write(b); err != nil {
		rl.failed = true
		if errors.Is(err, syscall.EPIPE) {
			rl.src.Close()
		}
	}
}
