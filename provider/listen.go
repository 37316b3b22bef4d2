package provider

import "ratelab/internal/loopback"

// Instance is a Server listening on a TCP address, usually a loopback port.
type Instance struct {
	// URL is the base URL to send requests to, such as
	// http://127.0.0.1:8080; messages go to URL + "/v1/messages".
	URL string
	// Server is the fake API being served.
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

// Close stops the instance at once: it closes the listener and every
// connection and makes the replies being generated give up. It returns once
// the serving goroutine has ended, and is idempotent.
func (in *Instance) Close() error { return in.srv.Close() }
