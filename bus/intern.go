package bus

import (
	"hash/maphash"
	"sync"
)

// interner hands out one copy of each job name and tenant, so that a
// million tasks of a thousand jobs hold a thousand name strings, not a
// million (issue 20.7), and a replayed record's name costs no allocation
// (issue 20.4). It is bounded: past internMax strings per stripe it
// returns fresh copies instead, so hostile names cannot grow it without
// limit; the strings it keeps are at most maxInternLen bytes.
type interner struct {
	seed    maphash.Seed
	stripes [internStripes]struct {
		mu sync.Mutex
		m  map[string]string
		_  [40]byte // one stripe per cache line
	}
}

const (
	internStripes = 16
	internMax     = 8192 // strings per stripe: 131 072 in all
	maxInternLen  = 256
)

func newInterner() *interner {
	in := &interner{seed: maphash.MakeSeed()}
	for i := range in.stripes {
		in.stripes[i].m = make(map[string]string)
	}
	return in
}

// bytes returns b as a string, the kept copy when there is one.
func (in *interner) bytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > maxInternLen {
		return string(b)
	}
	st := &in.stripes[maphash.Bytes(in.seed, b)%internStripes]
	st.mu.Lock()
	s, ok := st.m[string(b)] // no allocation: the compiler looks up without converting
	if !ok {
		s = string(b)
		if len(st.m) < internMax {
			st.m[s] = s
		}
	}
	st.mu.Unlock()
	return s
}

// string returns the kept copy of s, keeping s when there is none.
func (in *interner) string(s string) string {
	if s == "" || len(s) > maxInternLen {
		return s
	}
	st := &in.stripes[maphash.String(in.seed, s)%internStripes]
	st.mu.Lock()
	if k, ok := st.m[s]; ok {
		s = k
	} else if len(st.m) < internMax {
		st.m[s] = s
	}
	st.mu.Unlock()
	return s
}
