//go:build unix

package runtime

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// peekClosed reports, without blocking or consuming anything, whether the
// peer closed the socket (errServerClosed) or it failed. Data waiting is
// no error: with RESP3 it may be a push notification, which go-redis reads
// before the reply.
func peekClosed(raw syscall.RawConn) error {
	var perr error
	err := raw.Read(func(fd uintptr) bool {
		var buf [1]byte
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n == 0 && err == nil:
			perr = errServerClosed
		case err == nil, errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default:
			perr = fmt.Errorf("redis connection failed while idle: %w (%w)", err, io.EOF)
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("redis connection: %w (%w)", err, io.EOF)
	}
	return perr
}
