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

// rateLimits holds one token bucket per credential, for ingest.
type rateLimits struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// allowIngest takes n events from p's bucket. When it cannot, it returns
// the error to answer and how long the client should wait.
func (s *Server) allowIngest(p *Principal, n int) (time.Duration, error) {
	perSec := p.Rate
	if perSec == 0 {
		perSec = s.opts.IngestRate
	}
	if perSec <= 0 {
		return 0, nil
	}
	s.limits.mu.Lock()
	if s.limits.m == nil {
		s.limits.m = map[string]*rate.Limiter{}
	}
	key := p.Tenant + "\x00" + p.Name
	l := s.limits.m[key]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(perSec), perSec) // a second's worth of burst
		s.limits.m[key] = l
	}
	s.limits.mu.Unlock()
	if n > l.Burst() {
		return time.Second, &apollo.Error{Code: apollo.ETOOMANY, Message: fmt.Sprintf("%d events in one request, over this token's %d per second", n, perSec),
			Hint: "send smaller batches"}
	}
	now := s.now()
	r := l.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		wait := time.Duration(math.Ceil(d.Seconds())) * time.Second
		return wait, &apollo.Error{Code: apollo.ETOOMANY,
			Message: fmt.Sprintf("over this token's limit of %d events per second", perSec),
			Hint:    "retry after " + strconv.Itoa(int(wait.Seconds())) + "s; an admin can raise the token's rate"}
	}
	return 0, nil
}

// mayReport checks a token's job-name restriction.
func (p *Principal) mayReport(name string) error {
	if p.JobPrefix != "" && !strings.HasPrefix(name, p.JobPrefix) {
		return &apollo.Error{Code: apollo.EFORBIDDEN, Field: "name", Message: fmt.Sprintf("this token reports only jobs starting with %q", p.JobPrefix)}
	}
	return nil
}
