package httpapi

import (
	"context"
	"fmt"
	"net/http"
)

// Role is what a credential may do. Each route needs one role.
type Role uint8

const (
	RoleNone     Role = iota
	RoleAgent         // ingest and ping only
	RoleViewer        // read
	RoleOperator      // read, ack, silence, correct tasks, trigger jobs
	RoleAdmin         // everything: rules, channels, config, audit
)

var roleNames = [...]string{"none", "agent", "viewer", "operator", "admin"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", r)
}

// ParseRole turns a role name into a Role.
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames[1:] {
		if n == s {
			return Role(i + 1), nil
		}
	}
	return RoleNone, fmt.Errorf("unknown role %q: use agent, viewer, operator or admin", s)
}

// Allows reports whether a credential with role have may use a route that
// needs role need. Reading roles nest (viewer < operator < admin); the agent
// role only ingests, and admins may ingest too.
func (have Role) Allows(need Role) bool {
	switch need {
	case RoleNone:
		return true
	case RoleAgent:
		return have == RoleAgent || have == RoleAdmin
	default:
		return have != RoleAgent && have >= need
	}
}

// Principal is who is calling: from a token, or the local open mode.
type Principal struct {
	Name   string // the token's name, for the audit log
	Tenant string
	Role   Role
	Rate   int // events per second it may ingest; 0 = the server default
	// JobPrefix, when set, limits the jobs it may report (ping keys).
	JobPrefix string
	// credential tells one token from another (its hash): two tokens
	// may share a name and a tenant, and each has its own ingest bucket.
	// Empty for a principal not made from a token.
	credential string
}

// Authenticator finds the principal behind a request. It returns nil and
// an *apollo.Error (unauthorized) for a missing or bad credential.
type Authenticator interface {
	Authenticate(r *http.Request) (*Principal, error)
}

// OpenAuth grants every role, in the default tenant: the mode of a server
// with no tokens, which listens on loopback only.
type OpenAuth struct{}

// Authenticate implements Authenticator.
func (OpenAuth) Authenticate(*http.Request) (*Principal, error) {
	return &Principal{Name: "local", Role: RoleAdmin}, nil
}

type principalKey struct{}

// PrincipalFrom returns the principal a request was authenticated as.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// TenantOf is the tenant of the principal r was authenticated as; "" (the
// default tenant) for a route that needs none. Handlers mounted from
// other packages (GET /metrics) ask it.
func TenantOf(r *http.Request) string {
	if p := PrincipalFrom(r.Context()); p != nil {
		return p.Tenant
	}
	return ""
}
