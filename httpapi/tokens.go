package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/apollo-11/apollo"
)

// TokenPrefix starts every secret `apollo token create` makes, so that a
// leaked one is easy to recognise (and to scan for).
const TokenPrefix = "apl_"

// Token is one configured credential: the SHA-256 of its secret, never the
// secret itself.
type Token struct {
	Name   string
	Hash   [sha256.Size]byte
	Role   Role
	Tenant string
	// Rate is the events per second this token may ingest; 0 = the server default.
	Rate int
	// JobPrefix limits an agent token to jobs whose name starts with it:
	// a per-job ping key is such a token.
	JobPrefix string
}

// NewToken makes a random secret and the Token that accepts it.
func NewToken(name string, role Role, tenant string) (secret string, t Token, err error) {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", Token{}, err
	}
	secret = TokenPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
	return secret, Token{Name: name, Hash: sha256.Sum256([]byte(secret)), Role: role, Tenant: tenant}, nil
}

// ParseTokenHash reads the 64 hex digits of a configured token hash.
func ParseTokenHash(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	if len(s) != 2*sha256.Size {
		return h, fmt.Errorf("token hash: %d characters, want the 64 hex digits `apollo token create` prints", len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("token hash: not hex: %w", err)
	}
	return h, nil
}

// TokenAuth authenticates `Authorization: Bearer <secret>` against the
// configured tokens. Every configured hash is compared, in constant time,
// so the time taken does not tell which token nearly matched.
type TokenAuth struct {
	tokens []Token
}

// NewTokenAuth returns an authenticator for tokens (at least one).
func NewTokenAuth(tokens []Token) *TokenAuth { return &TokenAuth{tokens: tokens} }

var errUnauthorized = &apollo.Error{Code: apollo.EUNAUTHORIZED, Message: "missing or unknown token",
	Hint: "send Authorization: Bearer <token>; `apollo token create` makes one"}

// Authenticate implements Authenticator.
func (a *TokenAuth) Authenticate(r *http.Request) (*Principal, error) {
	secret, ok := BearerToken(r)
	if !ok && r.Header.Get("Authorization") == "" && strings.HasPrefix(r.URL.Path, "/ping/") {
		// Ping URLs come from cron lines with only curl: the key rides in the query.
		secret = r.URL.Query().Get("key")
		ok = secret != ""
	}
	if !ok {
		return nil, &authFailure{"no bearer token"}
	}
	return a.check(secret)
}

func (a *TokenAuth) check(secret string) (*Principal, error) {
	sum := sha256.Sum256([]byte(secret))
	var found *Token
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].Hash[:]) == 1 {
			found = &a.tokens[i]
		}
	}
	if found == nil {
		return nil, &authFailure{"unknown token"}
	}
	return &Principal{Name: found.Name, Tenant: found.Tenant, Role: found.Role, Rate: found.Rate, JobPrefix: found.JobPrefix,
		credential: string(found.Hash[:])}, nil
}

// authFailure is errUnauthorized, with the reason the audit log records
// (the client is told only errUnauthorized's message).
type authFailure struct{ reason string }

func (f *authFailure) Error() string { return errUnauthorized.Error() }
func (f *authFailure) Unwrap() error { return errUnauthorized }

// failureReason is what the audit log says about a failed authentication.
func failureReason(err error) string {
	if f, ok := errors.AsType[*authFailure](err); ok {
		return f.reason
	}
	return err.Error()
}

// bearer extracts the secret of an `Authorization: Bearer` header. The
// scheme is case-insensitive (RFC 9110); the secret must be printable ASCII
// without spaces.
func bearer(h string) (string, bool) {
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	secret = strings.TrimLeft(secret, " ")
	if secret == "" || len(secret) > 512 {
		return "", false
	}
	for i := 0; i < len(secret); i++ {
		if c := secret[i]; c <= ' ' || c > '~' {
			return "", false
		}
	}
	return secret, true
}
