package fakegpu

import (
	"context"
	"net"

	"ratelab/internal/loopback"
)

// Instance is a Server listening on a TCP address, usually a loopback port.
type Instance struct {
	// URL is the base URL to send requests to, such as http://127.0.0.1:8000.
	URL string
	// Server is the fake GPU being served.
	Server *Server

	srv *loopback.Server
}

// Listen starts serving s on addr ("127.0.0.1:0" picks a free port). The
// caller must Close the instance.
func Listen(s *Server, addr string) (*Instance, error) {
	srv, err := loopback.Listen(s, addr, s.Close)
	if err != nil {
		return nil, err
	}
	return &Instance{URL: srv.URL, Server: s, srv: srv}, nil
}

// Serve starts serving s on ln, which the instance then owns: a listener
// shared by several processes (grade serve --workers) or one of Listen's.
// The caller must Close the instance.
func Serve(s *Server, ln net.Listener) *Instance {
	srv := loopback.Serve(s, ln, s.Close)
	return &Instance{URL: srv.URL, Server: s, srv: srv}
}

// Close stops the instance at once: it closes the listener and every
// connection, and makes waiting and working requests give up. It returns
// once the serving goroutine has ended.
// Close is idempotent.
func (in *Instance) Close() error { return in.srv.Close() }

// Shutdown stops accepting connections and waits, until ctx ends, for the
// requests in progress to finish; then it closes whatever is left.
func (in *Instance) Shutdown(ctx context.Context) error { return in.srv.Shutdown(ctx) }
