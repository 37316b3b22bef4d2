package provider

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Instance is a Server listening on a TCP address, usually a loopback port.
type Instance struct {
	// URL is the base URL to send requests to, such as
	// http://127.0.0.1:8080; messages go to URL + "/v1/messages".
	URL string
	// Server is the fake API being served.
	Server *Server

	http      *http.Server
	done      chan error
	closeOnce sync.Once
	closeErr  error
}

// Listen starts serving s on addr ("127.0.0.1:0" picks a free port). The
// caller must Close the instance.
func Listen(s *Server, addr string) (*Instance, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	in := &Instance{URL: "http://" + ln.Addr().String(), Server: s, http: hs, done: make(chan error, 1)}
	go func() {
		err := hs.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		in.done <- err
	}()
	return in, nil
}

// Close stops the instance at once: it closes the listener and every
// connection and makes the replies being generated give up. It returns once
// the serving goroutine has ended, and is idempotent.
func (in *Instance) Close() error {
	in.closeOnce.Do(func() {
		in.Server.Close()
		in.closeErr = in.http.Close()
		if err := <-in.done; err != nil && in.closeErr == nil {
			in.closeErr = err
		}
	})
	return in.closeErr
}
