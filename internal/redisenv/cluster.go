package redisenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The shape of the cluster StartCluster forms: three primaries, each with
// one replica, the 16,384 hash slots split evenly between the primaries.
const (
	ClusterPrimaries = 3
	ClusterReplicas  = 1 // per primary
	ClusterSlots     = 16384
)

// quietDials silences go-redis's own log once a cluster is formed: a node
// killed on purpose (a failover) makes every client of it print each
// failed dial, hundreds of lines that say nothing the measurements do not.
var quietDials sync.Once

// dropLogs is a go-redis logger that drops everything.
type dropLogs struct{}

func (dropLogs) Printf(context.Context, string, ...any) {}

// ClusterNodeTimeout is the cluster-node-timeout of the nodes StartCluster
// starts: how long a primary may be unreachable before the others count it
// as failed and its replica takes over. Redis's default is 15 s; a second
// keeps a failover within a few seconds on loopback.
const ClusterNodeTimeout = time.Second

// ClusterFormTimeout bounds how long StartCluster waits for the nodes to
// agree that the cluster is formed (cluster_state:ok on every node, every
// replica in sync with its primary).
const ClusterFormTimeout = 20 * time.Second

// A ClusterNode is one redis-server of a Cluster.
type ClusterNode struct {
	// Server is the process.
	*Server
	// ID is its cluster node id (CLUSTER MYID).
	ID string
	// Primary says whether it was formed as a primary; a replica's
	// PrimaryOf is the index in Cluster.Nodes of the primary it replicates.
	Primary   bool
	PrimaryOf int
	// BusPort is the port of its cluster bus (cluster-port).
	BusPort int
	// Slots is the first and last hash slot a primary was given.
	Slots [2]int
	// Client talks to this node alone, for INFO, CLUSTER and the like.
	Client *redis.Client
}

// A Cluster is a Redis Cluster on loopback that this process formed for its
// own use: ClusterPrimaries primaries and as many replicas, each a private
// redis-server (see Server) in cluster mode, in a folder of its own that
// Close removes. Nodes lists the primaries first, then their replicas in the
// same order.
type Cluster struct {
	// Nodes are the servers, primaries first.
	Nodes []*ClusterNode
	// Client is a cluster client over every node, with the short timeouts
	// of Tune (see TuneCluster): it follows MOVED and ASK redirections and
	// routes each command by the hash slot of its first key.
	Client *redis.ClusterClient
	// Dir is the folder the nodes keep their cluster config files in.
	Dir string
}

// StartCluster starts 2 × ClusterPrimaries private redis-servers in cluster
// mode on free loopback ports, in a new folder under dir (made if missing),
// forms them into a cluster of ClusterPrimaries primaries with one replica
// each, and returns once every node says cluster_state:ok and every replica
// is in sync. It forms the cluster with CLUSTER ADDSLOTSRANGE, MEET and
// REPLICATE, so it needs no redis-cli. ctx bounds the start and the nodes'
// lives: when ctx ends (Ctrl-C), every node's process group is killed. The
// error wraps ErrNoServer when redis-server is not installed; on any error
// nothing is left running and the folder is gone.
func StartCluster(ctx context.Context, dir string) (*Cluster, error) {
	quietDials.Do(func() { redis.SetLogger(dropLogs{}) })
	bin, err := exec.LookPath(ServerProgram)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoServer, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("redisenv: %w", err)
	}
	own, err := os.MkdirTemp(dir, "cluster-*")
	if err != nil {
		return nil, fmt.Errorf("redisenv: %w", err)
	}
	c := &Cluster{Dir: own}
	if err := c.start(ctx, bin); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.form(ctx); err != nil {
		c.Close()
		return nil, err
	}
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	opt := &redis.ClusterOptions{Addrs: addrs}
	TuneCluster(opt)
	c.Client = redis.NewClusterClient(opt)
	return c, nil
}

// TuneCluster gives opt the short timeouts that Tune gives a client of one
// server, leaving alone any that are already set, and has the client reload
// the slot map every ClusterNodeTimeout instead of every 60 s. Redirections
// and retries stay the cluster client's: a MOVED is followed within the
// caller's context. The reload matters after a failover: go-redis (v9.23)
// reloads at once on MOVED, but a dead primary answers nothing, so without
// it every call for that primary's slots fails until the next reload, long
// after a replica has taken over.
func TuneCluster(opt *redis.ClusterOptions) {
	if opt.ClusterStateReloadInterval == 0 {
		opt.ClusterStateReloadInterval = ClusterNodeTimeout
	}
	for _, d := range []*time.Duration{&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout} {
		if *d == 0 {
			*d = Timeout
		}
	}
	if opt.DialerRetries == 0 {
		opt.DialerRetries = 1
	}
	opt.ContextTimeoutEnabled = true
}

// start starts the nodes, each on a free port with its cluster bus on
// another (cluster-port), so no port above 55535 stands in the way of the
// usual port + 10000.
func (c *Cluster) start(ctx context.Context, bin string) error {
	for i := range 2 * ClusterPrimaries {
		var last error
		for range 5 {
			port, err1 := freePort()
			bus, err2 := freePort()
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("redisenv: find a free port: %w", err)
			}
			if port == bus {
				continue
			}
			s, err := startOn(ctx, bin, c.Dir, port,
				"--cluster-enabled", "yes",
				"--cluster-config-file", fmt.Sprintf("%s/nodes-%d.conf", c.Dir, port),
				"--cluster-node-timeout", strconv.FormatInt(ClusterNodeTimeout.Milliseconds(), 10),
				"--cluster-port", strconv.Itoa(bus),
				// A replica syncs at once, not after the default 5 s wait for
				// others to share the transfer.
				"--repl-diskless-sync-delay", "0")
			if err == nil {
				n := &ClusterNode{Server: s, BusPort: bus, Primary: i < ClusterPrimaries, PrimaryOf: i % ClusterPrimaries}
				n.Client = redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: Timeout, ReadTimeout: Timeout, WriteTimeout: Timeout, MaxRetries: -1})
				c.Nodes = append(c.Nodes, n)
				last = nil
				break
			}
			last = err
			if ctx.Err() != nil {
				return err
			}
		}
		if last != nil {
			return last
		}
	}
	return nil
}

// form gives each primary its third of the slots, has the first node meet
// the others, waits until every node knows every other, makes the replicas
// replicate, and waits for the cluster to be ok.
func (c *Cluster) form(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(ctx, ClusterFormTimeout)
	defer cancel()
	for _, n := range c.Nodes {
		id, err := n.Client.Do(fctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("redisenv: CLUSTER MYID on %s: %w", n.Addr, err)
		}
		n.ID = id
	}
	per := ClusterSlots / ClusterPrimaries
	for i, n := range c.Nodes[:ClusterPrimaries] {
		n.Slots = [2]int{i * per, (i+1)*per - 1}
		if i == ClusterPrimaries-1 {
			n.Slots[1] = ClusterSlots - 1
		}
		if err := n.Client.Do(fctx, "CLUSTER", "ADDSLOTSRANGE", n.Slots[0], n.Slots[1]).Err(); err != nil {
			return fmt.Errorf("redisenv: CLUSTER ADDSLOTSRANGE on %s: %w", n.Addr, err)
		}
	}
	first := c.Nodes[0]
	for _, n := range c.Nodes[1:] {
		host, port := splitAddr(n.Addr)
		if err := first.Client.Do(fctx, "CLUSTER", "MEET", host, port, n.BusPort).Err(); err != nil {
			return fmt.Errorf("redisenv: CLUSTER MEET %s from %s: %w", n.Addr, first.Addr, err)
		}
	}
	if err := c.await(fctx, "every node to know the other five", func(n *ClusterNode) (bool, error) {
		nodes, err := n.Client.Do(fctx, "CLUSTER", "NODES").Text()
		return strings.Count(strings.TrimSpace(nodes), "\n")+1 == len(c.Nodes), err
	}); err != nil {
		return err
	}
	for _, n := range c.Nodes[ClusterPrimaries:] {
		p := c.Nodes[n.PrimaryOf]
		if err := n.Client.Do(fctx, "CLUSTER", "REPLICATE", p.ID).Err(); err != nil {
			return fmt.Errorf("redisenv: CLUSTER REPLICATE %s on %s: %w", p.Addr, n.Addr, err)
		}
	}
	return c.await(fctx, "cluster_state:ok on every node and every replica in sync", func(n *ClusterNode) (bool, error) {
		info, err := n.Client.Do(fctx, "CLUSTER", "INFO").Text()
		if err != nil || infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_known_nodes") != strconv.Itoa(len(c.Nodes)) {
			return false, err
		}
		if n.Primary {
			return true, nil
		}
		repl, err := n.Client.Info(fctx, "replication").Result()
		return infoField(repl, "master_link_status") == "up", err
	})
}

// await polls ready on every node until all say yes, a node exits, or ctx
// (bounded by ClusterFormTimeout) ends; the error says what was awaited.
func (c *Cluster) await(ctx context.Context, what string, ready func(*ClusterNode) (bool, error)) error {
	for {
		all, last := true, error(nil)
		for _, n := range c.Nodes {
			if exited, how := n.Exited(); exited {
				return fmt.Errorf("redisenv: forming a cluster: %s exited (%s)", n.Addr, how)
			}
			ok, err := ready(n)
			if !ok {
				all = false
				if err != nil {
					last = err
				}
			}
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return fmt.Errorf("redisenv: waited %v for %s: %w", ClusterFormTimeout, what, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Primaries returns the nodes formed as primaries.
func (c *Cluster) Primaries() []*ClusterNode { return c.Nodes[:ClusterPrimaries] }

// NodeOfSlot returns the node formed as the primary of hash slot slot.
func (c *Cluster) NodeOfSlot(slot int) *ClusterNode {
	for _, n := range c.Primaries() {
		if slot >= n.Slots[0] && slot <= n.Slots[1] {
			return n
		}
	}
	return nil
}

// Pids returns every node's process id.
func (c *Cluster) Pids() []int {
	pids := make([]int, len(c.Nodes))
	for i, n := range c.Nodes {
		pids[i] = n.Pid()
	}
	return pids
}

// String describes the cluster for logs and reports.
func (c *Cluster) String() string {
	v := ""
	if len(c.Nodes) > 0 {
		v = " " + c.Nodes[0].Version
	}
	return fmt.Sprintf("a private Redis Cluster%s of %d primaries and %d replicas on loopback (started by the grader)", v, ClusterPrimaries, ClusterPrimaries*ClusterReplicas)
}

// Close closes the clients, kills every node's process group, waits for
// them to exit and removes the cluster's folder. It is safe to call more
// than once.
func (c *Cluster) Close() {
	if c.Client != nil {
		c.Client.Close()
	}
	for _, n := range c.Nodes {
		n.Client.Close()
		n.Stop()
	}
	if c.Dir != "" {
		_ = os.RemoveAll(c.Dir)
	}
}

// splitAddr splits 127.0.0.1:40123 into its host and port.
func splitAddr(addr string) (host, port string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}
