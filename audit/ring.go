package audit

// ring keeps the newest entries of one tenant (or of the server), oldest
// first from next once full. Entries are pointers so that an aggregated
// failure entry can still be counted up while it is shown.
type ring struct {
	buf  []*Entry
	next int
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]*Entry, n)} }

func (r *ring) add(e *Entry) {
	r.buf[r.next] = e
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
}

func (r *ring) len() int {
	if r == nil {
		return 0
	}
	if r.full {
		return len(r.buf)
	}
	return r.next
}

// newest returns the i-th newest entry, 0 being the newest.
func (r *ring) newest(i int) *Entry { return r.buf[(r.next-1-i+len(r.buf))%len(r.buf)] }

// merge returns up to limit entries of a and b, newest first, as copies.
func merge(a, b *ring, limit int) []Entry {
	out := []Entry{}
	i, j := 0, 0
	for len(out) < limit && (i < a.len() || j < b.len()) {
		if j >= b.len() || (i < a.len() && !a.newest(i).At.Before(b.newest(j).At)) {
			out = append(out, *a.newest(i))
			i++
		} else {
			out = append(out, *b.newest(j))
			j++
		}
	}
	return out
}
