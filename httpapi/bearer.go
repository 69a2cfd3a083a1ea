package httpapi

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// BearerToken finds the token of a request: "Authorization: Bearer <token>",
// or, for a WebSocket (browsers cannot set headers on one), the subprotocol
// "bearer.<base64url(token)>" offered beside "apollo.v1":
//
//	Sec-WebSocket-Protocol: apollo.v1, bearer.c2VjcmV0
//
// The token is base64url-encoded (no padding) because a subprotocol may
// hold only token characters. The server answers with "apollo.v1" alone, so
// the token is never echoed. Authenticators that accept tokens should read
// them with this function, so the stream works from a browser.
func BearerToken(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		return bearer(h)
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), "bearer.")
			if !ok {
				continue
			}
			tok, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil || len(tok) == 0 {
				return "", false
			}
			return bearer("Bearer " + string(tok))
		}
	}
	return "", false
}
