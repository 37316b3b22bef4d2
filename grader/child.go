package grader

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"ratelab/fakegpu"
)

// buildServer compiles cmd/fakegpu with the given build tags (and overlay)
// into dir, and returns the binary's path or the compiler's complaint.
func buildServer(ctx context.Context, root, dir string, tags []string, overlay string) (string, error) {
	return buildCmd(ctx, root, dir, "fakegpu", tags, overlay)
}

// buildCmd compiles ./cmd/name with the given build tags (and overlay) into
// dir, and returns the binary's path or the compiler's complaint.
func buildCmd(ctx context.Context, root, dir, name string, tags []string, overlay string) (string, error) {
	bin := filepath.Join(dir, name+"-"+strings.Join(append([]string{"ref"}, tags...), "-"))
	return compile(ctx, root, dir, bin, []string{"build", "-o", bin}, "./cmd/"+name, tags, overlay)
}

// compile runs `go <verb...> [-tags] [-overlay] pkg` in root, bounded to 3
// minutes, and returns bin or the compiler's complaint.
func compile(ctx context.Context, root, dir, bin string, verb []string, pkg string, tags []string, overlay string) (string, error) {
	args := verb
	if len(tags) > 0 {
		args = append(args, "-tags="+strings.Join(tags, ","))
	}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	args = append(args, pkg)
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd, err := goCommand(cctx, root, dir, args...)
	if err != nil {
		return "", err
	}
	out, err := cmd.CombinedOutput()
	_ = killProcessGroup(cmd)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		return "", fmt.Errorf("does not compile: %s", firstLines(string(out), 4))
	}
	return bin, nil
}

// child is a fake GPU server running as a child process.
type child struct {
	URL      string
	StatsURL string // the worker's own address, when started with --stats-port
	cmd      *exec.Cmd
	stderr   *tailBuffer
	done     chan struct{}
	err      error
}

// startServer runs bin with args and waits until it says where it listens.
// The child is killed if ctx ends, and on Linux if the grader dies.
func startServer(ctx context.Context, bin string, args ...string) (*child, error) {
	return startServerFiles(ctx, bin, nil, args...)
}

// startServerFiles is startServer with files handed to the child from fd 3.
func startServerFiles(ctx context.Context, bin string, files []*os.File, args ...string) (*child, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.ExtraFiles = files
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 3 * time.Second
	setParentDeathSignal(cmd)
	c := &child{cmd: cmd, stderr: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	urlc := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var statsURL string
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 3 && f[0] == "stats" && f[1] == "on" {
				statsURL = f[2]
			}
			if len(f) >= 3 && f[0] == "listening" && f[1] == "on" {
				urlc <- [2]string{f[2], statsURL}
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	select {
	case u := <-urlc:
		c.URL, c.StatsURL = u[0], u[1]
		return c, nil
	case <-c.done:
		how := "exit status 0"
		if c.err != nil {
			how = c.err.Error()
		}
		msg := fmt.Sprintf("it exited as it started, before listening (%s)", how)
		if out := firstLines(c.stderr.String(), 4); out != "" {
			msg += ": " + out
		}
		return nil, errors.New(msg)
	case <-time.After(15 * time.Second):
		c.stop()
		return nil, errors.New("the server did not start listening within 15 s")
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
}

// stop ends the child: SIGTERM, then SIGKILL if it lingers.
func (c *child) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(3 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// panics returns the first panic the child logged (net/http recovers
// handler panics and logs them), or "".
func (c *child) panics() string { return panicServing(c.stderr.String()) }

// tailBuffer keeps the first max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// firstLines returns up to n non-empty lines of s, joined by " / ".
func firstLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
			if len(out) == n {
				break
			}
		}
	}
	return strings.Join(out, " / ")
}

// FindRoot returns the ratelab module's root folder, searching upward from
// dir for a go.mod that declares module ratelab.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "module ratelab\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the ratelab repository (no go.mod declaring module ratelab above this folder); cd into your ratelab checkout")
		}
		dir = parent
	}
}

// Server is a fake GPU server running as a child process, with task 2's
// admission and task 3's limiter taken from one tree.
type Server struct {
	// URL is where it listens, such as http://127.0.0.1:41234.
	URL     string
	c       *child
	cleanup func()
}

// StartServer builds cmd/fakegpu with impl's code for every task and runs it
// with args (its flags, such as "--mode", "shed", "--port", "8000"). The
// caller must Stop it.
func StartServer(ctx context.Context, root string, impl Impl, args ...string) (*Server, error) {
	bin, cleanup, err := BuildTool(ctx, root, impl, "fakegpu")
	if err != nil {
		return nil, err
	}
	c, err := startServer(ctx, bin, args...)
	if err != nil {
		cleanup()
		return nil, err
	}
	return &Server{URL: c.URL, c: c, cleanup: cleanup}, nil
}

// Stop ends the server and removes its binary. It is idempotent.
func (s *Server) Stop() {
	s.c.stop()
	s.cleanup()
}

// Panics returns the first handler panic the server logged, or "".
func (s *Server) Panics() string { return s.c.panics() }

// BuildTool compiles ./cmd/name (fakegpu, storm, breaker, ...) with impl's
// code for every task, into a temporary folder that cleanup removes. In a
// tree without solutions/ (a learner template) Solutions builds the
// learner's code: callers that let a user ask for the reference should
// check HasSolutions first.
func BuildTool(ctx context.Context, root string, impl Impl, name string) (bin string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", "ratelab-"+name+"-*")
	if err != nil {
		return "", nil, err
	}
	tags := referenceTags(root, nil) // Solutions: the reference, where there is one
	if impl == Exercises {
		tags = exerciseTags(root)
	}
	bin, err = buildCmd(ctx, root, tmp, name, tags, "")
	if err != nil {
		os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("build %s from %s: %w", name, impl, err)
	}
	return bin, func() { os.RemoveAll(tmp) }, nil
}

// RunJSON runs bin with args, bounded by limit, and decodes the JSON object
// it prints into v. A program that prints no JSON is an error quoting its
// stderr.
func RunJSON(ctx context.Context, limit time.Duration, v any, bin string, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, args...)
	setParentDeathSignal(cmd)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if err := json.Unmarshal([]byte(stdout.String()), v); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s failed: %v: %s", filepath.Base(bin), runErr, firstLines(stderr.String(), 4))
	}
	return nil
}

// Workers are several fake GPU processes sharing one listening socket on
// loopback, as `uvicorn --workers N` runs: each has its own slots and its own
// limiter, and the kernel hands each new connection to one of them.
type Workers struct {
	// URL is the shared address.
	URL string
	// StatsURLs are each worker's own address, for reading its /stats.
	StatsURLs []string
	children  []*child
	ln        *net.TCPListener
}

// StartWorkers starts n copies of the fakegpu binary bin with args, all
// serving one listening socket on 127.0.0.1:port (0 picks a free port). The
// caller must Stop them.
func StartWorkers(ctx context.Context, bin string, n, port int, args ...string) (*Workers, error) {
	if n < 1 || n > 64 {
		return nil, fmt.Errorf("workers %d: want 1 to 64", n)
	}
	if fakegpu.ReusePortBalances {
		return startReusePort(ctx, bin, n, port, args)
	}
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		return nil, fmt.Errorf("listen on port %d: %w", port, err)
	}
	f, err := ln.File()
	if err != nil {
		ln.Close()
		return nil, err
	}
	defer f.Close()
	w := &Workers{URL: "http://" + ln.Addr().String(), ln: ln}
	for i := 0; i < n; i++ {
		c, err := startServerFiles(ctx, bin, []*os.File{f}, append([]string{"--listen-fd", "3", "--stats-port", "0"}, args...)...)
		if err != nil {
			w.Stop()
			return nil, fmt.Errorf("worker %d: %w", i+1, err)
		}
		w.children = append(w.children, c)
		w.StatsURLs = append(w.StatsURLs, c.StatsURL)
	}
	return w, nil
}

// startReusePort starts the workers on Linux: each listens on the same
// port with SO_REUSEPORT, and the kernel hashes every new connection to one
// of them, evenly. The grader holds the port with a socket of its own until
// every worker listens, then closes it.
func startReusePort(ctx context.Context, bin string, n, port int, args []string) (*Workers, error) {
	hold, err := fakegpu.ListenReusePort(fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("listen on port %d: %w", port, err)
	}
	defer hold.Close()
	p := hold.Addr().(*net.TCPAddr).Port
	w := &Workers{URL: fmt.Sprintf("http://127.0.0.1:%d", p)}
	for i := 0; i < n; i++ {
		c, err := startServer(ctx, bin, append([]string{"--port", fmt.Sprint(p), "--reuse-port", "--stats-port", "0"}, args...)...)
		if err != nil {
			w.Stop()
			return nil, fmt.Errorf("worker %d: %w", i+1, err)
		}
		w.children = append(w.children, c)
		w.StatsURLs = append(w.StatsURLs, c.StatsURL)
	}
	return w, nil
}

// Stop ends every worker and closes the shared socket.
func (w *Workers) Stop() {
	for _, c := range w.children {
		c.stop()
	}
	if w.ln != nil {
		w.ln.Close()
	}
}

// Panics returns the first handler panic any worker logged, or "".
func (w *Workers) Panics() string {
	for _, c := range w.children {
		if p := c.panics(); p != "" {
			return p
		}
	}
	return ""
}
