package vsession

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"ratelab/fakegpu"
	"ratelab/internal/redisenv"
	"ratelab/internal/vnet"
	"ratelab/results"
)

// Task 6 in virtual time: several fake GPU servers (workers) behind one
// listener, as processes sharing a port, and in mode redis one miniredis
// that every worker's limiter shares, served over in-memory pipes
// (miniredis.Dial) inside the bubble. Its TTLs follow the bubble's clock
// (ClockTTL), and so does its TIME command, which the graded script reads
// for "now": keys expire in virtual time exactly as a real Redis's would
// in real time. The grader reads Redis's own records through the session
// (OpFlush, OpKeyspace, and OpFlood with ScanEvery), with the same SCAN
// and PTTL as on the wall clock (redisenv.Keyspace).

// KeyspaceMax bounds how many keys one read of the session's Redis
// returns: far more than task 6's burst of at most 3,000 clients leaves.
const KeyspaceMax = 100000

// redisTimeout is how long the session's own reads of its Redis may take,
// in virtual time: miniredis answers at once there.
const redisTimeout = 10 * time.Second

// miniRedis returns the session's Redis, starting it on first use; it
// lives until the session ends, across servers, as a Redis outlives the
// processes that use it.
func (s *session) miniRedis() (*miniredis.Miniredis, error) {
	if s.mr == nil {
		mr, err := startMemory()
		if err != nil {
			return nil, err
		}
		mr.ClockTTL(true)
		s.mr = mr
		s.rdb = s.redisClient() // the grader's, for SCAN and PTTL
	}
	return s.mr, nil
}

// redisClient returns a new client of the session's Redis: each worker
// has its own, as separate processes would.
func (s *session) redisClient() *redis.Client { return memoryClient(s.mr) }

// memoryClient returns a client of mr that dials it in memory (no socket,
// usable in a bubble), with the short timeouts a worker's client has on the
// wall clock (redisenv.Tune).
func memoryClient(mr *miniredis.Miniredis) *redis.Client {
	opt := &redis.Options{
		Addr:   redisAddr.String(), // for messages only: Dialer makes the connections
		Dialer: func(context.Context, string, string) (net.Conn, error) { return dialMemory(mr) },
	}
	redisenv.Tune(opt)
	return redis.NewClient(opt)
}

// redisAddr is the address a session's Redis connections report.
var redisAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379}

// dialMemory connects to mr over a buffered in-memory connection
// (vnet.Pipe), as a socket's buffers are: miniredis.Dial's net.Pipe has
// none, so a pipeline (the keyspace's PTTLs) would block the client's
// writes behind the server's unread replies.
// mr must have been started (startMemory).
func dialMemory(mr *miniredis.Miniredis) (net.Conn, error) {
	srv := mr.Server()
	if srv == nil {
		return nil, errors.New("redis: closed")
	}
	client, server := vnet.Pipe(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, redisAddr)
	srv.ServeConn(server)
	return client, nil
}

// startMemory returns a started miniredis without a listener, served only
// through dialMemory.
func startMemory() (*miniredis.Miniredis, error) {
	mr := miniredis.NewMiniRedis()
	c, err := mr.Dial() // starts its server
	if err != nil {
		return nil, fmt.Errorf("start miniredis: %w", err)
	}
	c.Close()
	return mr, nil
}

// closeRedis stops the session's Redis, if it started one.
func (s *session) closeRedis() {
	if s.mr == nil {
		return
	}
	s.rdb.Close()
	s.mr.Close()
	s.mr, s.rdb = nil, nil
}

// keyspace reads every key of the session's Redis with its PTTL.
func (s *session) keyspace() ([]redisenv.KeyTTL, error) {
	if _, err := s.miniRedis(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	return redisenv.Keyspace(ctx, s.rdb, "*", KeyspaceMax)
}

// flushRedis empties the session's Redis.
func (s *session) flushRedis() error {
	if _, err := s.miniRedis(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	return s.rdb.FlushAll(ctx).Err()
}

// newWorker returns one worker configured as cfg: in mode redis with a
// client of its own on the session's Redis, closed with the server.
func (s *session) newWorker(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error) {
	if cfg.Mode != fakegpu.ModeRedis {
		return s.host.NewServer(cfg, opts...)
	}
	if s.host.NewRedisServer == nil {
		return nil, errors.New("mode redis: no Redis limiter in this session")
	}
	if _, err := s.miniRedis(); err != nil {
		return nil, err
	}
	rdb := s.redisClient()
	srv, err := s.host.NewRedisServer(cfg, rdb, opts...)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	s.clients = append(s.clients, rdb)
	return srv, nil
}

// startWorkers starts n workers configured as cfg behind one listener on
// the session's network, which hands them its connections in turn (round
// robin: deterministic, where the wall clock's SO_REUSEPORT spreads them
// by a hash of each connection's ports).
func (s *session) startWorkers(cfg fakegpu.Config, n int) error {
	settle := Settle() // one for all: synctest.Wait allows one caller at a time
	var srvs []*fakegpu.Server
	for range max(n, 1) {
		srv, err := s.newWorker(cfg, fakegpu.WithSettle(settle))
		if err != nil {
			for _, w := range srvs {
				w.Close()
			}
			s.closeClients()
			if n > 1 {
				return fmt.Errorf("worker %d of %d: %w", len(srvs)+1, n, err)
			}
			return err
		}
		srvs = append(srvs, srv)
	}
	nw := &vnet.Network{}
	l, err := nw.Listen(Addr)
	if err != nil {
		return err
	}
	s.net, s.srv, s.srvs, s.ln = nw, srvs[0], srvs, l
	queues := make([]*connQueue, len(srvs))
	for i, srv := range srvs {
		queues[i] = newConnQueue(l.Addr())
		hs := &http.Server{Handler: srv}
		s.hss = append(s.hss, hs)
		go func() { _ = hs.Serve(queues[i]) }()
	}
	go spread(l, queues)
	return nil
}

// closeClients closes the workers' Redis clients.
func (s *session) closeClients() {
	for _, c := range s.clients {
		c.Close()
	}
	s.clients = nil
}

// stats reads every worker's counters: their sum, and each worker's when
// there are several.
func (s *session) stats() (sum results.ServerStats, each []results.ServerStats) {
	if len(s.srvs) == 1 {
		return s.srvs[0].Stats(), nil
	}
	for _, srv := range s.srvs {
		each = append(each, srv.Stats())
	}
	return results.SumWorkers(each), each
}

// spread accepts l's connections and hands them to queues in turn, until
// l is closed; then it closes the queues.
func spread(l net.Listener, queues []*connQueue) {
	defer func() {
		for _, q := range queues {
			q.Close()
		}
	}()
	for i := 0; ; i++ {
		c, err := l.Accept()
		if err != nil {
			return
		}
		q := queues[i%len(queues)]
		select {
		case q.conns <- c:
		case <-q.done:
			c.Close()
		}
	}
}

// connQueue is one worker's listener: the connections spread hands it.
type connQueue struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	addr  net.Addr
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{conns: make(chan net.Conn), done: make(chan struct{}), addr: addr}
}

// Accept returns the next connection handed to this worker.
func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept.
func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

// Addr is the shared listener's address.
func (q *connQueue) Addr() net.Addr { return q.addr }
