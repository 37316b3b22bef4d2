package redisenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ServerProgram is the program StartServer runs, looked up in PATH.
const ServerProgram = "redis-server"

// ErrNoServer is wrapped by StartServer's error when redis-server is not
// installed: the caller falls back to an embedded miniredis.
var ErrNoServer = errors.New("redisenv: no redis-server in PATH")

// A Server is a private redis-server that this process started for its own
// use: on a free loopback port, with no persistence, in a folder given by
// the caller (made if missing), in a process group of its own (on Linux the kernel kills it if
// this process dies). Stop ends it; so does cancelling the context it was
// started with.
type Server struct {
	// URL is where it listens, such as redis://127.0.0.1:40123.
	URL string
	// Addr is host:port of URL.
	Addr string
	// Version is what it says in INFO server, such as "7.0.15".
	Version string

	cmd    *exec.Cmd
	output *tail
	done   chan struct{} // closed when the process has exited
	err    error         // how it exited, once done is closed
	stop   sync.Once
}

// ServerAvailable reports whether StartServer can run: redis-server is in
// PATH.
func ServerAvailable() bool {
	_, err := exec.LookPath(ServerProgram)
	return err == nil
}

// StartServer starts a private redis-server on a free port of 127.0.0.1,
// with dir as its working folder (nothing is written there: no snapshots,
// no append-only file), and returns once it answers PING. ctx bounds the
// start and the server's life: when ctx ends, the server's process group is
// killed. The error wraps ErrNoServer when redis-server is not installed.
func StartServer(ctx context.Context, dir string) (*Server, error) {
	bin, err := exec.LookPath(ServerProgram)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoServer, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("redisenv: %w", err)
	}
	// A port that was free a moment ago can be taken by someone else before
	// redis-server binds it; then it exits at once and another is tried.
	var last error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("redisenv: find a free port: %w", err)
		}
		s, err := startOn(ctx, bin, dir, port)
		if err == nil {
			return s, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// startOn starts redis-server on port, with extra arguments after the
// usual ones, and waits until it answers.
func startOn(ctx context.Context, bin, dir string, port int, extra ...string) (*Server, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--daemonize", "no", "--logfile", "", "--loglevel", "warning"}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	out := &tail{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	ownGroup(cmd)
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redisenv: start %s: %w", bin, err)
	}
	s := &Server{URL: "redis://" + addr, Addr: addr, cmd: cmd, output: out, done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		killGroup(cmd) // anything it left in its group
		close(s.done)
	}()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: Timeout, ReadTimeout: Timeout, WriteTimeout: Timeout, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, Timeout)
		info, err := rdb.Info(pctx, "server").Result()
		cancel()
		if err == nil {
			s.Version = infoField(info, "redis_version")
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("redisenv: %s on port %d exited as it started (%v): %s", ServerProgram, port, s.err, strings.TrimSpace(out.String()))
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("redisenv: start %s: %w", ServerProgram, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("redisenv: %s on port %d did not answer within 5s: %w", ServerProgram, port, err)
		}
	}
}

// Stop kills the server's process group and waits for the server to exit.
// It is safe to call more than once, and after the server has exited.
func (s *Server) Stop() {
	s.stop.Do(func() { killGroup(s.cmd) })
	<-s.done
}

// Exited reports whether the server has stopped, and if so how: the error of
// its exit (nil for a clean exit) and its last lines of output.
func (s *Server) Exited() (exited bool, how string) {
	select {
	case <-s.done:
		how = "exited"
		if s.err != nil {
			how = s.err.Error()
		}
		if out := strings.TrimSpace(s.output.String()); out != "" {
			how += ": " + lastLine(out)
		}
		return true, how
	default:
		return false, ""
	}
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// String describes the server for logs and reports.
func (s *Server) String() string {
	return fmt.Sprintf("a private redis-server %s at %s", s.Version, s.Addr)
}

// Version asks the Redis behind rdb for its version (INFO server), such as
// "7.0.15"; "" when it does not say. miniredis does not answer INFO server
// the way Redis does.
func Version(ctx context.Context, rdb *redis.Client) string {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	return infoField(info, "redis_version")
}

// infoField returns the value of field in the text of an INFO reply.
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// freePort returns a TCP port of 127.0.0.1 that nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = bytes.Clone(t.buf[over:])
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
