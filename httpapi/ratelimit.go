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
	// refused counts the requests answered 429 by the buckets, by tenant
	// (anonymous: the open local mode, no token). Its keys are the
	// configured tokens' tenants: a caller cannot add one.
	refused map[refusalKey]*RateRefusals
}

type refusalKey struct {
	tenant    string
	anonymous bool
}

// RateRefusals counts requests refused by the ingest rate limit (HTTP
// 429), before their events reached the bus.
type RateRefusals struct {
	Requests int64 `json:"requests"`
	// Events are those of the requests whose body was read: a request
	// that finds its bucket empty is refused unread (ingestExhausted),
	// and counts in Requests alone.
	Events int64 `json:"events"`
}

// RateLimitStats is the "rateLimit" part of GET /api/v1/system as one
// tenant sees it: its own refusals; the default tenant (the operators)
// sees every tenant's, by name, and the anonymous ones.
type RateLimitStats struct {
	RateRefusals
	Tenants   map[string]RateRefusals `json:"tenants,omitempty"` // "" is the default tenant's tokens
	Anonymous *RateRefusals           `json:"anonymous,omitempty"`
}

// countRefused counts one request of p refused by the rate limit, with
// events events (0: not read).
func (s *Server) countRefused(p *Principal, events int) {
	k := refusalKey{tenant: p.Tenant, anonymous: p.credential == "" && p.Tenant == ""}
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	if s.limits.refused == nil {
		s.limits.refused = map[refusalKey]*RateRefusals{}
	}
	r := s.limits.refused[k]
	if r == nil {
		r = &RateRefusals{}
		s.limits.refused[k] = r
	}
	r.Requests++
	r.Events += int64(events)
}

// rateLimitStats is what tenant may see of the refusals.
func (s *Server) rateLimitStats(tenant string) RateLimitStats {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	var out RateLimitStats
	for k, r := range s.limits.refused {
		switch {
		case tenant != "" && (k.tenant != tenant || k.anonymous):
			continue
		case tenant != "":
		case k.anonymous:
			out.Anonymous = &RateRefusals{r.Requests, r.Events}
		default:
			if out.Tenants == nil {
				out.Tenants = map[string]RateRefusals{}
			}
			out.Tenants[k.tenant] = *r
		}
		out.Requests += r.Requests
		out.Events += r.Events
	}
	return out
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
	s.countRefused(p, 0)
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
		s.countRefused(p, n)
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
