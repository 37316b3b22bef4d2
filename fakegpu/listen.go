package fakegpu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Instance is a Server listening on a TCP address, usually a loopback port.
type Instance struct {
	// URL is the base URL to send requests to, such as http://127.0.0.1:8000.
	URL string
	// Server is the fake GPU being served.
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
	return Serve(s, ln), nil
}

// Serve starts serving s on ln, which the instance then owns: a listener
// shared by several processes (grade serve --workers) or one of Listen's.
// The caller must Close the instance.
func Serve(s *Server, ln net.Listener) *Instance {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	in := &Instance{URL: "http://" + ln.Addr().String(), Server: s, http: hs, done: make(chan error, 1)}
	go func() {
		err := hs.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		in.done <- err
	}()
	return in
}

// Close stops the instance at once: it closes the listener and every
// connection, and makes waiting and working requests give up. It returns
// once the serving goroutine has ended.
// Close is idempotent.
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

// Shutdown stops accepting connections and waits, until ctx ends, for the
// requests in progress to finish; then it closes whatever is left.
func (in *Instance) Shutdown(ctx context.Context) error {
	err := in.http.Shutdown(ctx)
	if cerr := in.Close(); err == nil {
		err = cerr
	}
	return err
}
