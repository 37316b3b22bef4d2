// Package loopback serves one http.Handler on one listener until it is
// closed, for the lab's fake servers (fakegpu, provider): a free port on
// 127.0.0.1, a Close that ends every connection and waits for the serving
// goroutine, and a graceful Shutdown.
package loopback

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server is a handler being served on a listener.
type Server struct {
	// URL is the base URL to send requests to, such as http://127.0.0.1:8000.
	URL string

	http      *http.Server
	onClose   func()
	done      chan error
	closeOnce sync.Once
	closeErr  error
}

// Listen starts serving h on addr ("127.0.0.1:0" picks a free port).
// onClose, if not nil, runs first when the server is closed (to make
// requests in progress give up). The caller must Close the server.
func Listen(h http.Handler, addr string, onClose func()) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return Serve(h, ln, onClose), nil
}

// Serve starts serving h on ln, which the server then owns. onClose is as
// for Listen. The caller must Close the server.
func Serve(h http.Handler, ln net.Listener, onClose func()) *Server {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s := &Server{URL: "http://" + ln.Addr().String(), http: hs, onClose: onClose, done: make(chan error, 1)}
	go func() {
		err := hs.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s
}

// Close stops the server at once: it runs onClose, closes the listener and
// every connection, and returns once the serving goroutine has ended. It is
// idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.onClose != nil {
			s.onClose()
		}
		s.closeErr = s.http.Close()
		if err := <-s.done; err != nil && s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}

// Shutdown stops accepting connections and waits, until ctx ends, for the
// requests in progress to finish; then it closes whatever is left.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}
