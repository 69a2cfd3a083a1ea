//go:build unix

package httpapi

import (
	"bytes"
	"net"
	"syscall"
)

// holdsRequest reports whether c's socket holds, not yet read, the end of
// a request header (or more than buf takes, which no connection that
// dribbles bytes does). It looks without taking (MSG_PEEK) and without
// waiting, through Control: unlike a read, it does not wait for the
// connection's goroutine blocked in its own.
func holdsRequest(c net.Conn, buf []byte) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) {
		n, _, err = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return err == nil && n > 0 && (n == len(buf) || bytes.Contains(buf[:n], []byte("\r\n\r\n")))
}
