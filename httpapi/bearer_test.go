package httpapi

import (
	"encoding/base64"
	"net/http"
	"testing"
)

func TestBearerToken(t *testing.T) {
	t.Parallel()
	enc := base64.RawURLEncoding.EncodeToString
	tests := []struct {
		name   string
		header map[string]string
		tok    string
		ok     bool
	}{
		{"authorization", map[string]string{"Authorization": "Bearer s3cret"}, "s3cret", true},
		{"scheme in any case", map[string]string{"Authorization": "bearer s3cret"}, "s3cret", true},
		{"basic is not bearer", map[string]string{"Authorization": "Basic eDp5"}, "", false},
		{"subprotocol", map[string]string{"Sec-WebSocket-Protocol": "apollo.v1, bearer." + enc([]byte("a/b+c=d"))}, "a/b+c=d", true},
		{"subprotocol first", map[string]string{"Sec-WebSocket-Protocol": "bearer." + enc([]byte("t")) + ",apollo.v1"}, "t", true},
		{"header wins", map[string]string{"Authorization": "Bearer h", "Sec-WebSocket-Protocol": "apollo.v1, bearer." + enc([]byte("p"))}, "h", true},
		{"bad base64", map[string]string{"Sec-WebSocket-Protocol": "apollo.v1, bearer.***"}, "", false},
		{"empty", map[string]string{"Sec-WebSocket-Protocol": "apollo.v1, bearer."}, "", false},
		{"none", nil, "", false},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest("GET", "/api/v1/stream", nil)
		for k, v := range tt.header {
			r.Header.Set(k, v)
		}
		tok, ok := BearerToken(r)
		if tok != tt.tok || ok != tt.ok {
			t.Errorf("%s: %q %v, want %q %v", tt.name, tok, ok, tt.tok, tt.ok)
		}
	}
}
