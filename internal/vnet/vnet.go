// Package vnet is an in-memory network for running servers and their clients
// inside a testing/synctest bubble, where time is fake and advances only
// when every goroutine is durably blocked.
//
// Real sockets do not work there: a goroutine blocked in a read on a TCP
// connection waits on the operating system, which synctest cannot see, so
// fake time would never move. vnet's connections keep their bytes in memory
// and block only on channels and timers, which synctest treats as durable.
// Writes never block (each direction's buffer grows as needed, as a socket
// with a large send buffer would); reads block until data, the peer's close
// or the read deadline.
//
// A Network holds listeners by address. Servers call Listen and serve the
// returned net.Listener as usual (http.Server.Serve); clients dial with
// DialContext, which fits http.Transport.DialContext. Everything works
// outside a bubble as well, on the real clock.
package vnet

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Network is a set of in-memory listeners, each at its own address. The
// zero value is ready to use. A Network is safe for concurrent use.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
	nextPort  int // the next client port handed out, from 40000 up
}

// Listen returns a listener at address, a host:port such as
// "127.0.0.1:8000". Port 0 picks a free one. Listening twice at one address
// fails, as it would on a real network.
func (n *Network) Listen(address string) (*Listener, error) {
	addr, err := net.ResolveTCPAddr("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("vnet: listen %s: %w", address, err)
	}
	if addr.IP == nil {
		addr.IP = net.IPv4(127, 0, 0, 1)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners == nil {
		n.listeners = map[string]*Listener{}
	}
	if addr.Port == 0 {
		addr.Port = 8000
		for n.listeners[addr.String()] != nil {
			addr.Port++
		}
	}
	if n.listeners[addr.String()] != nil {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: addr, Err: syscall.EADDRINUSE}
	}
	l := &Listener{net: n, addr: addr, ready: make(chan struct{}, 1), idle: make(chan struct{}, 1)}
	l.idle <- struct{}{}
	n.listeners[addr.String()] = l
	return l, nil
}

// DialContext connects to the listener at address, such as
// "127.0.0.1:8000"; network must be "tcp", "tcp4" or "tcp6". With no
// listener there, it fails at once with connection refused, as loopback
// does. It fits http.Transport.DialContext.
func (n *Network) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
	}
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	raddr, err := net.ResolveTCPAddr("tcp", address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	n.mu.Lock()
	l := n.listeners[raddr.String()]
	if n.nextPort == 0 {
		n.nextPort = 40000
	}
	laddr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: n.nextPort}
	n.nextPort++
	n.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: network, Source: laddr, Addr: raddr, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if l == nil {
		return nil, refused
	}
	client, server := Pipe(laddr, l.addr)
	if !l.enqueue(server) {
		return nil, refused
	}
	return client, nil
}

// remove forgets l, when it closes.
func (n *Network) remove(l *Listener) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners[l.addr.String()] == l {
		delete(n.listeners, l.addr.String())
	}
}

// Listener is a net.Listener on a Network.
type Listener struct {
	net  *Network
	addr *net.TCPAddr
	// Exactly one of ready and idle holds a token while the listener is
	// unlocked: ready when a connection waits to be accepted or the
	// listener is closed, idle otherwise. Taking a token locks it; Accept
	// waits on ready, which synctest counts as durably blocked.
	ready, idle chan struct{}
	queue       []net.Conn
	closed      bool
}

func (l *Listener) lock() {
	select {
	case <-l.ready:
	case <-l.idle:
	}
}

func (l *Listener) unlock() {
	if l.closed || len(l.queue) > 0 {
		l.ready <- struct{}{}
	} else {
		l.idle <- struct{}{}
	}
}

// enqueue hands c to Accept; false if the listener is closed.
func (l *Listener) enqueue(c net.Conn) bool {
	l.lock()
	defer l.unlock()
	if l.closed {
		return false
	}
	l.queue = append(l.queue, c)
	return true
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	<-l.ready
	defer l.unlock()
	if l.closed {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
	c := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	return c, nil
}

// Close stops the listener: Accept returns net.ErrClosed, new dials are
// refused, and connections not yet accepted are closed.
func (l *Listener) Close() error {
	l.lock()
	if l.closed {
		l.unlock()
		return nil
	}
	l.closed = true
	pending := l.queue
	l.queue = nil
	l.unlock()
	l.net.remove(l)
	for _, c := range pending {
		c.Close()
	}
	return nil
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }

// Pipe returns the two ends of one in-memory connection: what is written to
// one is read from the other. local and remote are the addresses the first
// end reports (the second reports them the other way round).
func Pipe(local, remote *net.TCPAddr) (net.Conn, net.Conn) {
	ab, ba := newHalf(), newHalf() // a→b and b→a
	a := &Conn{local: local, remote: remote, in: ba, out: ab}
	b := &Conn{local: remote, remote: local, in: ab, out: ba}
	return a, b
}

// Conn is one end of an in-memory connection. It is safe for concurrent
// use, as a net.Conn must be.
type Conn struct {
	local, remote *net.TCPAddr
	in, out       *half // in: bytes for this end to read; out: for the peer
	readDeadline  deadline
	writeDeadline deadline
}

// Read reads what the peer wrote. It blocks until there is data, the peer
// closes (io.EOF once the data is read), this end closes (net.ErrClosed)
// or the read deadline passes (os.ErrDeadlineExceeded).
func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.in.read(b, c.readDeadline.done())
	if err != nil && err != io.EOF {
		err = &net.OpError{Op: "read", Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
	}
	return n, err
}

// Write sends b to the peer. It does not block: the bytes wait in memory
// until the peer reads them. It fails once either end has closed, or the
// write deadline has passed.
func (c *Conn) Write(b []byte) (int, error) {
	select {
	case <-c.writeDeadline.done():
		return 0, &net.OpError{Op: "write", Net: "tcp", Source: c.local, Addr: c.remote, Err: os.ErrDeadlineExceeded}
	default:
	}
	n, err := c.out.write(b)
	if err != nil {
		err = &net.OpError{Op: "write", Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
	}
	return n, err
}

// Close closes this end. Reads on it return net.ErrClosed; the peer reads
// what was already sent, then io.EOF, and its writes fail with a reset.
func (c *Conn) Close() error {
	c.in.shut(net.ErrClosed, syscall.ECONNRESET)
	c.out.finish()
	c.readDeadline.stop()
	c.writeDeadline.stop()
	return nil
}

// LocalAddr returns this end's address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets both the read and the write deadline.
func (c *Conn) SetDeadline(t time.Time) error {
	c.readDeadline.set(t)
	c.writeDeadline.set(t)
	return nil
}

// SetReadDeadline sets when pending and future reads give up; the zero
// time means never.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.readDeadline.set(t)
	return nil
}

// SetWriteDeadline sets when future writes give up; the zero time means
// never. Writes never wait, so only a deadline already past matters.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.writeDeadline.set(t)
	return nil
}

// half is one direction of a connection: a buffer the writer appends to and
// the reader takes from.
type half struct {
	// Exactly one of readable and empty holds a token while the half is
	// unlocked: readable when a read would not block (data, or an error to
	// return), empty otherwise.
	readable, empty chan struct{}
	buf             []byte
	readErr         error // returned once buf is empty: io.EOF or net.ErrClosed
	writeErr        error // returned by every write
}

func newHalf() *half {
	h := &half{readable: make(chan struct{}, 1), empty: make(chan struct{}, 1)}
	h.empty <- struct{}{}
	return h
}

func (h *half) lock() {
	select {
	case <-h.readable:
	case <-h.empty:
	}
}

func (h *half) unlock() {
	if len(h.buf) > 0 || h.readErr != nil {
		h.readable <- struct{}{}
	} else {
		h.empty <- struct{}{}
	}
}

func (h *half) read(b []byte, deadline <-chan struct{}) (int, error) {
	select {
	case <-h.readable:
	default:
		select {
		case <-h.readable:
		case <-deadline:
			return 0, os.ErrDeadlineExceeded
		}
	}
	defer h.unlock()
	if len(h.buf) == 0 {
		return 0, h.readErr
	}
	n := copy(b, h.buf)
	h.buf = h.buf[n:]
	if len(h.buf) == 0 {
		h.buf = nil // let a large buffer go
	}
	return n, nil
}

func (h *half) write(b []byte) (int, error) {
	h.lock()
	defer h.unlock()
	if h.writeErr != nil {
		return 0, h.writeErr
	}
	h.buf = append(h.buf, b...)
	return len(b), nil
}

// shut is the reading end closing: unread bytes are dropped, reads return
// readErr and the writer's writes writeErr.
func (h *half) shut(readErr, writeErr error) {
	h.lock()
	defer h.unlock()
	h.buf = nil
	h.readErr = readErr
	if h.writeErr == nil {
		h.writeErr = writeErr
	}
}

// finish is the writing end closing: the reader gets what was written, then
// io.EOF; further writes fail.
func (h *half) finish() {
	h.lock()
	defer h.unlock()
	if h.readErr == nil {
		h.readErr = io.EOF
	}
	h.writeErr = net.ErrClosed
}

// deadline is a settable point in time, as net.Conn's deadlines are: done
// returns a channel that is closed once it passes. Moving it later before it
// passes keeps the channel, so a read already waiting sees the new time.
type deadline struct {
	mu      sync.Mutex
	ch      chan struct{} // closed when the deadline passes
	expired bool
	timer   *time.Timer
}

func (d *deadline) done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	return d.ch
}

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.ch == nil || d.expired {
		d.ch, d.expired = make(chan struct{}), false
	}
	if t.IsZero() {
		return
	}
	wait := time.Until(t)
	if wait <= 0 {
		close(d.ch)
		d.expired = true
		return
	}
	ch := d.ch
	d.timer = time.AfterFunc(wait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.ch == ch && !d.expired {
			close(ch)
			d.expired = true
		}
	})
}

// stop cancels a pending timer, so a closed connection leaves none behind
// (a synctest bubble waits for its timers' goroutines).
func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}
