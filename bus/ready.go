package bus

import "sync"

// readyList holds the tasks that have changes to deliver, first in first
// out. It is never full: a task is on it at most once, so its length is
// bounded by the number of tasks in memory.
type readyList struct {
	mu    sync.Mutex
	items []readyTask
	head  int
	wake  chan struct{}
}

func newReadyList(workers int) *readyList {
	return &readyList{wake: make(chan struct{}, workers)}
}

func (l *readyList) push(rt readyTask) {
	l.mu.Lock()
	if l.head > 0 && l.head == len(l.items) {
		l.items, l.head = l.items[:0], 0
	}
	l.items = append(l.items, rt)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // every worker is awake already
	}
}

// pop returns the next task, waiting until there is one or stop is closed.
func (l *readyList) pop(stop <-chan struct{}) (readyTask, bool) {
	for {
		l.mu.Lock()
		if l.head < len(l.items) {
			rt := l.items[l.head]
			l.items[l.head] = readyTask{}
			l.head++
			if l.head > 1024 && l.head*2 > len(l.items) { // compact: keep memory proportional to the backlog
				n := copy(l.items, l.items[l.head:])
				clear(l.items[n:])
				l.items, l.head = l.items[:n], 0
			}
			more := l.head < len(l.items)
			l.mu.Unlock()
			if more { // pass the wake-up on, so idle workers help
				select {
				case l.wake <- struct{}{}:
				default:
				}
			}
			return rt, true
		}
		l.mu.Unlock()
		select {
		case <-l.wake:
		case <-stop:
			return readyTask{}, false
		}
	}
}
