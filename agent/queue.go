package agent

// item is one encoded event on its way to the server.
type item struct {
	data []byte // the event's JSON, as it goes on the wire and into the spool
	// id numbers events in the order this process enqueued them; 0 for
	// events read from the spool, whose order is their place on disk.
	id uint64
	// sord is the event's place in the spool when it was read from there
	// (0 for a file left by an earlier process); Flush compares it.
	sord uint64
	// file holds the event on disk; nil while the event is only in memory.
	file *spoolFile
}

// fifo is the in-memory queue of events not yet taken by the sender. Items
// are pushed and taken in id order.
type fifo struct {
	buf  []item
	head int
}

func (q *fifo) len() int { return len(q.buf) - q.head }

// headID is the id of the oldest queued event, or 0 if the queue is empty.
func (q *fifo) headID() uint64 {
	if q.len() == 0 {
		return 0
	}
	return q.buf[q.head].id
}

func (q *fifo) push(it item) {
	if len(q.buf) == cap(q.buf) && q.head > 0 {
		// Reuse the space of taken items instead of growing.
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, it)
}

// take appends up to n of the oldest items to dst.
func (q *fifo) take(dst []item, n int) []item {
	n = min(n, q.len())
	dst = append(dst, q.buf[q.head:q.head+n]...)
	clear(q.buf[q.head : q.head+n]) // let the event bytes go once sent
	q.head += n
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	return dst
}
