package vnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serve runs an http.Server with h on a new listener of n, and returns a
// client that dials through n and a function that stops both.
func serve(t *testing.T, n *Network, h http.Handler) (*http.Client, string, func()) {
	t.Helper()
	l, err := n.Listen("127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	tr := &http.Transport{DialContext: n.DialContext, MaxIdleConnsPerHost: 1000}
	return &http.Client{Transport: tr}, "http://" + l.Addr().String(), func() {
		tr.CloseIdleConnections()
		srv.Close()
		<-done
	}
}

// In a bubble, HTTP over vnet costs no fake time, so a handler's sleep is
// exactly what the client waits, for one request or many at once.
func TestHTTPInABubbleIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n Network
		client, url, stop := serve(t, &n, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(100 * time.Millisecond)
			fmt.Fprint(w, "hello")
		}))
		defer stop()
		start := time.Now()
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				resp, err := client.Get(url + "/generate")
				if !assert.NoError(t, err) {
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.NoError(t, err)
				assert.Equal(t, "hello", string(b))
				assert.Equal(t, 100*time.Millisecond, time.Since(start), "a request's fake duration")
			})
		}
		wg.Wait()
	})
}

// A client timeout ends the request exactly when it says, and the server's
// handler sees its request's context end when the client goes.
func TestClientTimeoutAndServerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n Network
		gone := make(chan time.Duration, 1)
		start := time.Now()
		client, url, stop := serve(t, &n, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
				gone <- time.Since(start)
			case <-time.After(5 * time.Second):
				gone <- -1
			}
		}))
		defer stop()
		client.Timeout = time.Second
		_, err := client.Get(url)
		require.Error(t, err)
		var ne net.Error
		require.True(t, errors.As(err, &ne) && ne.Timeout(), "a timeout error: %v", err)
		assert.Equal(t, time.Second, time.Since(start))
		assert.Equal(t, time.Second, <-gone, "the handler sees the client leave at once")
	})
}

func TestReadDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := Pipe(&net.TCPAddr{Port: 1}, &net.TCPAddr{Port: 2})
		defer a.Close()
		defer b.Close()
		start := time.Now()
		require.NoError(t, a.SetReadDeadline(start.Add(300*time.Millisecond)))
		go func() {
			time.Sleep(100 * time.Millisecond)
			// Moving the deadline later while a read waits applies to it.
			a.SetReadDeadline(start.Add(500 * time.Millisecond))
		}()
		_, err := a.Read(make([]byte, 1))
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
		assert.Equal(t, 500*time.Millisecond, time.Since(start))
		var ne net.Error
		assert.True(t, errors.As(err, &ne) && ne.Timeout())

		// A deadline in the past fails at once; clearing it lets reads wait
		// for data again.
		a.SetReadDeadline(time.Now().Add(-time.Second))
		_, err = a.Read(make([]byte, 1))
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
		a.SetReadDeadline(time.Time{})
		go func() {
			time.Sleep(time.Second)
			b.Write([]byte("x"))
		}()
		buf := make([]byte, 4)
		k, err := a.Read(buf)
		require.NoError(t, err)
		assert.Equal(t, "x", string(buf[:k]))

		a.SetWriteDeadline(time.Now().Add(-time.Second))
		_, err = a.Write([]byte("y"))
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	})
}

func TestCloseSemantics(t *testing.T) {
	a, b := Pipe(&net.TCPAddr{Port: 1}, &net.TCPAddr{Port: 2})
	_, err := a.Write([]byte("last words"))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	got, err := io.ReadAll(b)
	require.NoError(t, err, "the peer reads what was sent, then EOF")
	assert.Equal(t, "last words", string(got))
	_, err = b.Write([]byte("too late"))
	assert.ErrorIs(t, err, syscall.ECONNRESET, "writing to a closed peer")
	_, err = a.Read(make([]byte, 1))
	assert.ErrorIs(t, err, net.ErrClosed, "reading a closed end")
	_, err = a.Write([]byte("x"))
	assert.ErrorIs(t, err, net.ErrClosed, "writing a closed end")
}

// Large writes never block and arrive whole, in order.
func TestLargeTransfer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := Pipe(&net.TCPAddr{Port: 1}, &net.TCPAddr{Port: 2})
		want := make([]byte, 4<<20)
		for i := range want {
			want[i] = byte(i * 7)
		}
		for i := 0; i < len(want); i += 1 << 16 {
			_, err := a.Write(want[i : i+1<<16])
			require.NoError(t, err)
		}
		a.Close()
		got, err := io.ReadAll(b)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		b.Close()
	})
}

func TestListenAndDial(t *testing.T) {
	var n Network
	_, err := n.DialContext(context.Background(), "tcp", "127.0.0.1:9")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "nothing listens")
	l, err := n.Listen("127.0.0.1:9")
	require.NoError(t, err)
	_, err = n.Listen("127.0.0.1:9")
	assert.ErrorIs(t, err, syscall.EADDRINUSE)
	c, err := n.DialContext(context.Background(), "tcp", "127.0.0.1:9")
	require.NoError(t, err)
	s, err := l.Accept()
	require.NoError(t, err)
	assert.Equal(t, c.LocalAddr().String(), s.RemoteAddr().String())
	assert.Equal(t, "127.0.0.1:9", c.RemoteAddr().String())
	c2, err := n.DialContext(context.Background(), "tcp", "127.0.0.1:9")
	require.NoError(t, err)
	assert.NotEqual(t, c.LocalAddr().String(), c2.LocalAddr().String(), "each client gets its own port")
	require.NoError(t, l.Close())
	_, err = l.Accept()
	assert.ErrorIs(t, err, net.ErrClosed)
	_, err = c2.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "a connection never accepted is closed with the listener")
	_, err = n.DialContext(context.Background(), "tcp", "127.0.0.1:9")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "closed listeners refuse")
	_, err = n.Listen("127.0.0.1:9")
	assert.NoError(t, err, "the address is free again")
	_, err = n.DialContext(context.Background(), "udp", "127.0.0.1:9")
	assert.Error(t, err)
}

// Outside a bubble vnet runs on the real clock like any network.
func TestRealClock(t *testing.T) {
	var n Network
	client, url, stop := serve(t, &n, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(10 * time.Millisecond)
		fmt.Fprint(w, "ok")
	}))
	defer stop()
	start := time.Now()
	resp, err := client.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	assert.GreaterOrEqual(t, time.Since(start), 10*time.Millisecond)
}
