package httpapi

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/apollo-11/apollo"
)

// rateLimits holds one token bucket per credential, for ingest: per
// token, not per name, since tokens may share a name (apollo token create
// names a token after its role) and each has its own rate.
type rateLimits struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// limiter returns p's ingest bucket and its rate; nil when p is not
// limited.
func (s *Server) limiter(p *Principal) (*rate.Limiter, int) {
	perSec := p.Rate
	if perSec == 0 {
		perSec = s.opts.IngestRate
	}
	if perSec <= 0 {
		return nil, 0
	}
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	if s.limits.m == nil {
		s.limits.m = map[string]*rate.Limiter{}
	}
	key := "token\x00" + p.credential
	if p.credential == "" {
		key = "name\x00" + p.Tenant + "\x00" + p.Name
	}
	l := s.limits.m[key]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(perSec), perSec) // a second's worth of burst
		s.limits.m[key] = l
	}
	return l, perSec
}

// ingestExhausted refuses a request before its body is read when p's bucket
// has no event left: under sustained overload most requests end here, and
// reading and decoding bodies only to refuse them cost CPU and memory that
// grew with the excess (the overload drill measured it).
func (s *Server) ingestExhausted(p *Principal) (time.Duration, error) {
	l, perSec := s.limiter(p)
	if l == nil || l.TokensAt(s.now()) >= 1 {
		return 0, nil
	}
	return time.Second, tooMany(perSec, time.Second)
}

// allowIngest takes n events from p's bucket. When it cannot, it returns
// the error to answer and how long the client should wait.
func (s *Server) allowIngest(p *Principal, n int) (time.Duration, error) {
	l, perSec := s.limiter(p)
	if l == nil {
		return 0, nil
	}
	if n > l.Burst() { // never let through: 413, as in overLimit
		return 0, &apollo.Error{Code: apollo.ETOOLARGE, Message: fmt.Sprintf("%d events in one request, over this token's %d per second", n, perSec),
			Hint: fmt.Sprintf("send at most %d per request, or ask an admin to raise the token's rate", l.Burst())}
	}
	now := s.now()
	r := l.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		wait := time.Duration(math.Ceil(d.Seconds())) * time.Second
		return wait, tooMany(perSec, wait)
	}
	return 0, nil
}

func tooMany(perSec int, wait time.Duration) error {
	return &apollo.Error{Code: apollo.ETOOMANY,
		Message: fmt.Sprintf("over this token's limit of %d events per second", perSec),
		Hint:    "retry after " + strconv.Itoa(int(wait.Seconds())) + "s; an admin can raise the token's rate"}
}

// mayReport checks a token's job-name restriction.
func (p *Principal) mayReport(name string) error {
	if p.JobPrefix != "" && !strings.HasPrefix(name, p.JobPrefix) {
		return &apollo.Error{Code: apollo.EFORBIDDEN, Field: "name", Message: fmt.Sprintf("this token reports only jobs starting with %q", p.JobPrefix)}
	}
	return nil
}
