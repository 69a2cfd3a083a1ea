package httpapi

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/apollo-11/apollo"
)

// A page from any site can make the browser send requests to this server:
// forms, images and fetch in no-cors mode need no permission. With tokens
// such a request carries none (a page cannot set Authorization on another
// site without a CORS preflight, which this server never grants), so it is
// refused. Without tokens, the server would obey it, and a page on a name
// the attacker controls that resolves to 127.0.0.1 (DNS rebinding) would
// even read the answers. So:
//
//   - without tokens, the server answers only to Host names that are IP
//     addresses, loopback names, or listed (checkHost);
//   - a request that changes something and carries no token must come
//     from this server's own pages, or from no browser at all (checkSite);
//   - a JSON body must say so (checkJSON): text/plain is what a page may
//     send without asking.

// effect is what a route does, for these checks.
type effect uint8

const (
	reads       effect = iota // changes nothing
	changes                   // changes state; a body, if any, is in the route's own format
	changesJSON               // changes state from a JSON body
)

// checkHost refuses, in the no-token mode, a Host this server is not
// reached by: the name of a page that rebinds its own domain to us.
func (s *Server) checkHost(r *http.Request) error {
	if !s.open {
		return nil
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	// An address cannot be rebound: a page that names one is on it.
	if host == "" || net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") ||
		matchAny(s.opts.AllowedHosts, host) {
		return nil
	}
	return &apollo.Error{Code: apollo.EFORBIDDEN,
		Message: fmt.Sprintf("this server has no tokens and answers only to its own host names, not to %s", quoteInput(r.Host)),
		Hint:    "open it by its address (http://127.0.0.1:1969) or as localhost; behind a reverse proxy, add the proxy's host name to auth.allowed_hosts"}
}

// checkSite refuses a request that changes something, carries no token and
// comes from a page on another origin. Browsers say where a request comes
// from (Sec-Fetch-Site, and Origin on most requests); other clients (curl,
// the SDKs, the CLI) send neither and are not browsers a page can steer.
// A Bearer token is not a page's: only a script sets one, and never on
// another site without a preflight. Any other Authorization may be: a
// browser attaches the Basic credentials a proxy asked for to every
// request to that origin, another site's form included.
func (s *Server) checkSite(r *http.Request, e effect) error {
	if e == reads {
		return nil
	}
	if scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " "); strings.EqualFold(scheme, "Bearer") {
		return nil
	}
	site, origin := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
	switch {
	case site == "same-origin" || site == "none": // none: typed or bookmarked by the user
		return nil
	case site == "" && origin == "":
		return nil
	}
	if u, err := url.Parse(origin); origin != "" && err == nil && u.Host != "" {
		if (site == "" && strings.EqualFold(u.Host, r.Host)) || s.trustedOrigin(u) {
			return nil
		}
	}
	from := origin
	if from == "" {
		from = site
	}
	return &apollo.Error{Code: apollo.EFORBIDDEN,
		Message: fmt.Sprintf("a page from another site (%s) may not change anything here", quoteInput(from)),
		Hint:    "use the dashboard this server serves, or a token; if the dashboard is served under another name, add it to auth.allowed_origins"}
}

// trustedOrigin reports whether an origin matches auth.allowed_origins:
// patterns of its host, or with a scheme, of scheme://host.
func (s *Server) trustedOrigin(u *url.URL) bool {
	host := strings.ToLower(u.Host)
	return matchAny(s.opts.AllowedOrigins, host) || matchAny(s.opts.AllowedOrigins, strings.ToLower(u.Scheme)+"://"+host)
}

// checkJSON refuses a body that does not say it is JSON on a route that
// reads one.
func checkJSON(r *http.Request, e effect) error {
	if e != changesJSON {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	return &apollo.Error{Code: apollo.EUNSUPPORTED, Field: "Content-Type",
		Message: fmt.Sprintf("%s: this route reads a JSON body", quoteInput(ct)),
		Hint:    "send Content-Type: application/json"}
}

// matchAny reports whether name matches one of the path.Match patterns.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToLower(p), name); ok {
			return true
		}
	}
	return false
}
