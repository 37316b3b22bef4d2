package fakegpu

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// ListenReusePort listens on addr with SO_REUSEPORT, so that several
// processes can listen on one port and the kernel spreads new connections
// evenly among them by hashing each connection's addresses.
func ListenReusePort(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}

// ReusePortBalances reports whether SO_REUSEPORT spreads connections among
// the listeners here. On Linux it does.
const ReusePortBalances = true
