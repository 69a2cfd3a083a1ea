package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo/bus"
)

// Headers of a decision-log message.
const (
	// hdrInput is the highest event-stream sequence of the partition whose
	// decisions are all in the log up to and including this message: a new
	// owner reads the events from the one after it.
	hdrInput = "Apollo-Input"
	hdrNode  = "Apollo-Node"
	// hdrSnapshot, on an empty message, names the snapshot object that
	// holds the partition's state up to the log sequence in hdrCovers.
	hdrSnapshot = "Apollo-Snapshot"
	hdrCovers   = "Apollo-Covers"
	// hdrLSN, on a snapshot marker, is the LSN of the last record the
	// snapshot covers: the records after it take the LSNs after it
	// (livefeed.go).
	hdrLSN = "Apollo-LSN"
	// hdrHandover, on an empty message, is the bookmark of an owner that
	// handed the partition over: it stopped its bus, so every change in
	// the log before it was published (partition.stop).
	hdrHandover = "Apollo-Handover"
)

// maxLogBatch bounds one decision-log message, under NATS's default
// max_payload of 1 MiB.
const maxLogBatch = 512 << 10

// ErrFenced is the reason a partition's log stops taking records: another
// node wrote to it, so this node no longer owns the partition.
var ErrFenced = errors.New("cluster: the partition's log was written by another owner")

// decisionLog is bus.Log over a JetStream subject, one per partition. It
// commits in groups: Append buffers a record under the bus's shard lock;
// one goroutine publishes what has gathered as one message, carrying the
// expected last sequence of the subject. Only one owner can therefore
// extend the log: a stale owner's next message is refused, and it stops.
type decisionLog struct {
	js      jetstream.JetStream
	subject string
	node    string
	timeout time.Duration
	hook    func() // Options.testLogHook; set before the first publish

	// pubMu makes publishing one at a time: each message expects the
	// sequence the one before it got.
	pubMu sync.Mutex

	mu      sync.Mutex
	batches []logBatch // not yet published, oldest first
	// spare is the buffer of the last batch published, emptied, for the
	// next batch: a buffer per batch, grown from 4 KiB by appending, was
	// 6.6% of the bytes a node allocated (bench/intro-benchmarks.md).
	spare    []byte
	next     uint64 // last LSN handed out
	durable  uint64 // highest LSN in JetStream
	lastSeq  uint64 // stream sequence of the last message of the subject
	input    uint64 // events decided through this stream sequence
	err      error  // once set, the log takes nothing more
	progress chan struct{}

	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	// published counts messages and records, for Stats.
	messages, records uint64
}

type logBatch struct {
	data []byte
	last uint64 // the LSN of its last record
}

var _ bus.Log = (*decisionLog)(nil)

// newDecisionLog returns a log that continues after lastSeq (the subject's
// last message, 0 if none) and after the LSNs replay handed out.
func newDecisionLog(js jetstream.JetStream, p int, node string, lastSeq, lsn, input uint64, timeout time.Duration) *decisionLog {
	l := &decisionLog{
		js: js, subject: logSubject(p), node: node, timeout: timeout,
		next: lsn, durable: lsn, lastSeq: lastSeq, input: input,
		progress: make(chan struct{}), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go l.loop()
	return l
}

// Append adds a record to the batch being gathered and returns its LSN.
func (l *decisionLog) Append(payload []byte) (uint64, error) {
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return 0, err
	}
	n := len(l.batches)
	if n == 0 || len(l.batches[n-1].data)+len(payload)+binary.MaxVarintLen32 > maxLogBatch {
		data := l.spare
		if data == nil {
			data = make([]byte, 0, min(maxLogBatch, 4096))
		}
		l.spare = nil
		l.batches = append(l.batches, logBatch{data: data})
		n++
	}
	b := &l.batches[n-1]
	b.data = binary.AppendUvarint(b.data, uint64(len(payload)))
	b.data = append(b.data, payload...)
	l.next++
	b.last = l.next
	lsn := l.next
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return lsn, nil
}

// Wait returns once lsn is in JetStream, or the log failed.
func (l *decisionLog) Wait(ctx context.Context, lsn uint64) error {
	for {
		l.mu.Lock()
		durable, err, ch := l.durable, l.err, l.progress
		l.mu.Unlock()
		if durable >= lsn {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// decided records that every event up to the stream sequence seq has been
// decided and its records are durable; the next message carries it.
func (l *decisionLog) decided(seq uint64) {
	l.mu.Lock()
	if seq > l.input {
		l.input = seq
	}
	l.mu.Unlock()
}

// Err is the reason the log stopped taking records, or nil.
func (l *decisionLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *decisionLog) loop() {
	defer close(l.done)
	for {
		select {
		case <-l.wake:
		case <-l.stop:
			l.flush() // what was appended before Close
			return
		}
		l.flush()
	}
}

// flush publishes the gathered batches one by one.
func (l *decisionLog) flush() {
	for {
		l.mu.Lock()
		if len(l.batches) == 0 || l.err != nil {
			l.mu.Unlock()
			return
		}
		// Take the batch out, so that what is appended while it is being
		// published goes into the next one.
		b := l.batches[0]
		l.batches[0] = logBatch{}
		l.batches = l.batches[1:]
		l.mu.Unlock()
		err := l.publish(b.data, nil)
		l.mu.Lock()
		if err != nil {
			l.err = fmt.Errorf("cluster: appending to %s: %w", l.subject, err)
		} else {
			l.durable = b.last
			// The client copied the message before it was sent: the buffer
			// is free.
			l.spare = b.data[:0]
		}
		close(l.progress)
		l.progress = make(chan struct{})
		l.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// publish writes one message expecting the subject's last sequence to be
// the one the previous message got. One publish runs at a time.
func (l *decisionLog) publish(data []byte, extra nats.Header) error {
	l.pubMu.Lock()
	defer l.pubMu.Unlock()
	l.mu.Lock()
	input, lastSeq := l.input, l.lastSeq
	l.mu.Unlock()
	if l.hook != nil {
		l.hook()
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	m := &nats.Msg{Subject: l.subject, Data: data, Header: nats.Header{}}
	m.Header.Set(hdrInput, strconv.FormatUint(input, 10))
	m.Header.Set(hdrNode, l.node)
	for k, v := range extra {
		m.Header[k] = v
	}
	ack, err := l.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(lastSeq))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return fmt.Errorf("%w (%v)", ErrFenced, err)
		}
		return err
	}
	l.mu.Lock()
	l.lastSeq = ack.Sequence
	l.messages++
	l.mu.Unlock()
	return nil
}

// mark publishes an empty message with the current input position: a
// fence when a new owner starts, a bookmark when one hands over. With
// extra headers it is a snapshot marker.
func (l *decisionLog) mark(extra nats.Header) error {
	l.wakeAndWait()
	if err := l.Err(); err != nil {
		return err
	}
	if err := l.publish(nil, extra); err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.err = fmt.Errorf("cluster: marking %s: %w", l.subject, err)
		return l.err
	}
	return nil
}

// position makes everything appended so far durable and returns the log's
// last sequence and the LSN of the last record. Called while the bus is
// paused (bus.Checkpoint), they cover exactly the state.
func (l *decisionLog) position() (lastSeq, lsn uint64, err error) {
	l.wakeAndWait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSeq, l.next, l.err
}

// wakeAndWait publishes everything appended so far.
func (l *decisionLog) wakeAndWait() {
	l.mu.Lock()
	lsn := l.next
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	l.Wait(context.Background(), lsn) // the error stays in l.err
}

// Close publishes what was appended and stops. Later Appends fail.
func (l *decisionLog) Close() {
	l.mu.Lock()
	select {
	case <-l.stop:
		l.mu.Unlock()
		<-l.done
		return
	default:
	}
	close(l.stop)
	l.mu.Unlock()
	<-l.done
	l.mu.Lock()
	if l.err == nil {
		l.err = bus.ErrClosed
	}
	close(l.progress)
	l.progress = make(chan struct{})
	l.mu.Unlock()
}

// logStats are a decision log's counters.
type logStats struct {
	Messages uint64 `json:"messages"`
	LastSeq  uint64 `json:"lastSeq"`
	Input    uint64 `json:"input"`
	Error    string `json:"error,omitempty"`
}

func (l *decisionLog) stats() logStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := logStats{Messages: l.messages, LastSeq: l.lastSeq, Input: l.input}
	if l.err != nil {
		s.Error = l.err.Error()
	}
	return s
}

// splitBatch calls fn for every record of a decision-log message. It is
// the decoder of data read back from JetStream, so it checks every length.
func splitBatch(data []byte, fn func(rec []byte) error) error {
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if k <= 0 || n > uint64(len(data)-k) {
			return fmt.Errorf("cluster: decision log message damaged at %d bytes from its end", len(data))
		}
		if err := fn(data[k : k+int(n)]); err != nil {
			return err
		}
		data = data[k+int(n):]
	}
	return nil
}
