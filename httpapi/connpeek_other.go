//go:build !unix

package httpapi

import "net"

// holdsRequest: elsewhere than Unix the socket is not looked at; a
// connection not being parsed may be closed for a new one.
func holdsRequest(net.Conn, []byte) bool { return false }
