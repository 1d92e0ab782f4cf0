//go:build !unix

package runtime

import "syscall"

// peekClosed cannot peek at a socket here (go-redis does not either): the
// first command on a connection the server closed fails, and is retried.
func peekClosed(syscall.RawConn) error { return nil }
