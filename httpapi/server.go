package httpapi

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/audit"
)

// Bus is what the API needs of the task state.
type Bus interface {
	Publish(ctx context.Context, evs []apollo.Event, out []apollo.Outcome) error
	// JobOf is the job of a task in memory, "" for none; the bus refuses
	// an event naming another job than its task's, so a stale answer can
	// only refuse an event, never let one through. It fails (EUNAVAILABLE)
	// when it cannot tell now: the event is answered retry_later.
	JobOf(tenant, taskID string) (string, error)
	Get(tenant, taskID string) (*apollo.Task, error)
	List(f apollo.TaskFilter) ([]apollo.Task, string, error)
	// Ping decides the event of one ping URL request, paired with the
	// job's open run (apollo.Ping), and returns it once it is durable.
	Ping(ctx context.Context, p apollo.Ping) (apollo.Event, apollo.Outcome, error)
	Correct(ctx context.Context, tenant, taskID string, to apollo.Status, actor, reason string) (*apollo.Task, error)
}

// Auditor records state-changing actions and failed authentications
// (package audit).
type Auditor interface {
	Record(e audit.Entry)
	// RecordFailure counts a request whose caller could not be
	// authenticated; the auditor aggregates them, so that callers with no
	// token cannot fill it.
	RecordFailure(e audit.Entry)
	List(tenant string, limit int) []audit.Entry
}

// Options wire the server to the rest of Apollo-11. Only Bus is required.
type Options struct {
	Bus        Bus
	Metrics    MetricsStore // nil in processes without metrics
	Deliveries Deliveries   // nil in processes that send no notifications
	Scheduler  Scheduler    // nil unless the scheduler runs in this process
	// SchedulerTenant owns the scheduler's jobs; other tenants do not see them.
	SchedulerTenant string
	Auth            Authenticator // default OpenAuth: no tokens (see AllowedHosts)
	// AllowedHosts are the host names, besides IP addresses and loopback
	// names, that a server with OpenAuth answers to (path.Match patterns,
	// e.g. a reverse proxy's "apollo.example.com"); any other Host is
	// refused, against DNS rebinding (crosssite.go). Unused with tokens.
	AllowedHosts []string
	// AllowedOrigins are the other origins (the stream's patterns, see
	// stream.Options) whose pages may change things without a token.
	AllowedOrigins []string
	Audit          Auditor      // default: a memory log of 1000 entries
	Clock          apollo.Clock // default the system clock
	Logger         *slog.Logger
	// IngestRate is the events per second a token may ingest unless the
	// token sets its own; 0 = unlimited.
	IngestRate int
	// MaxBodyBytes bounds request bodies; default 4 MiB.
	MaxBodyBytes int64
	// Ready reports whether the server has finished recovery; nil = always.
	Ready func() bool
	// Unavailable says why a server that has finished recovery cannot
	// take requests now, or nil when it can (nil func: always can): a
	// scale-out node cut off NATS. GET /readyz answers 503 with the reason
	// while it is not nil, so a load balancer sends the clients elsewhere.
	Unavailable func() error
	// Stream is the live stream behind GET /api/v1/stream; nil: 404. The
	// caller starts and stops it.
	Stream Stream
	// Web serves the dashboard at "/" (web.Handler()); nil: 404.
	Web http.Handler
	// System are the named parts of GET /api/v1/system (bus, stream, wal,
	// alert, redis, ...), each read at every request as the caller's
	// tenant may see it; cmd/apollo lists them with the parts of
	// Prometheus (selfmetrics.Parts).
	System map[string]func(tenant string) any
	// Prometheus serves GET /metrics (selfmetrics.Parts.Handler); nil:
	// 404. It finds the caller's tenant with PrincipalFrom.
	Prometheus http.Handler
	// Alerts serves alerts and silences (alert.Engine); nil answers
	// those routes with 503.
	Alerts AlertEngine
	// Rules serves GET and PUT /api/v1/rules (rulebook.Book); nil
	// answers them with 503.
	Rules RuleBook
	// NoAlertingHint is what the 503 of those routes, without Alerts
	// or Rules, tells to do; default: start apollo server (or apollo
	// alert) with alerting. A scale-out node says how its mode alerts.
	NoAlertingHint string
	// Expectations serves the job expectations and the learner's
	// proposals; nil answers those routes with 503.
	Expectations Expectations
}

// Server serves the API. It is an http.Handler.
type Server struct {
	opts   Options
	open   bool // no tokens: OpenAuth
	log    *slog.Logger
	mux    *http.ServeMux
	limits rateLimits
}

// New returns a Server with every route of routes() registered.
func New(opts Options) *Server {
	if opts.Auth == nil {
		opts.Auth = OpenAuth{}
	}
	if opts.Clock == nil {
		opts.Clock = apollo.SystemClock
	}
	if opts.Audit == nil {
		opts.Audit = audit.NewMemory(1000, opts.Clock)
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	log := opts.Logger
	if log == nil {
		log = discardLogger
	}
	_, open := opts.Auth.(OpenAuth)
	s := &Server{opts: opts, open: open, log: log.With("component", "httpapi"), mux: http.NewServeMux()}
	for _, rt := range s.routes() {
		s.mux.Handle(rt.method+" "+rt.path, s.guard(rt))
	}
	return s
}

// nosniff is set on every answer: a browser never reads an answer as
// another type than it is declared (a task's extra field in JSON as HTML).
// A shared slice: setting it allocates nothing per request.
var nosniff = []string{"nosniff"}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()["X-Content-Type-Options"] = nosniff
	if err := checkPingPath(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) now() time.Time { return s.opts.Clock.Now() }

// audit records an action by the request's principal.
func (s *Server) audit(r *http.Request, p *Principal, action, target, detail string) {
	s.opts.Audit.Record(audit.Entry{Actor: p.Name, Tenant: p.Tenant, Action: action, Target: target, Detail: detail, Remote: r.RemoteAddr})
}

// handler is the shape of every route: an error return is answered by
// writeError, through the one table of statuses.
type handler func(w http.ResponseWriter, r *http.Request, p *Principal) error

// route is one line of the route table.
type route struct {
	method, path string
	role         Role
	h            handler
	effect       effect
}

// guard refuses requests from other sites (crosssite.go), authenticates,
// checks the route's role and body type, and maps errors.
func (s *Server) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := cmp.Or(s.checkHost(r), s.checkSite(r, rt.effect)); err != nil {
			s.opts.Audit.RecordFailure(audit.Entry{Actor: "?", Action: "request.refused", Target: r.Method + " " + r.URL.Path,
				Detail: err.Error(), Remote: r.RemoteAddr})
			s.writeError(w, r, err)
			return
		}
		var p *Principal
		if rt.role != RoleNone {
			var err error
			p, err = s.opts.Auth.Authenticate(r)
			if err != nil {
				if apollo.ErrorCode(err) == apollo.EUNAUTHORIZED {
					s.opts.Audit.RecordFailure(audit.Entry{Actor: "?", Action: "auth.fail", Target: r.Method + " " + r.URL.Path,
						Detail: failureReason(err), Remote: r.RemoteAddr})
				}
				s.writeError(w, r, err)
				return
			}
			if !p.Role.Allows(rt.role) {
				s.writeError(w, r, &apollo.Error{Code: apollo.EFORBIDDEN,
					Message: "this needs the " + rt.role.String() + " role; the token has " + p.Role.String(),
					Hint:    "use a token with that role"})
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		}
		if err := checkJSON(r, rt.effect); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := rt.h(w, r, p); err != nil {
			s.writeError(w, r, err)
		}
	})
}
