package results

import "time"

// Cluster is the Redis Cluster that task 6's cluster checks ran on: its
// nodes as formed, and what happened when the grader killed a primary.
type Cluster struct {
	// Primaries are the nodes formed as primaries, each with the hash slots
	// it was given; Replicas the nodes formed as their replicas.
	Primaries []ClusterNode `json:"primaries"`
	Replicas  []ClusterNode `json:"replicas"`
	// NodeTimeoutMS is the nodes' cluster-node-timeout, in milliseconds:
	// how long a primary may be unreachable before the others count it
	// failed and its replica takes over.
	NodeTimeoutMS float64 `json:"node_timeout_ms"`
	// Failover is the flood that lost a primary; nil when it did not run.
	Failover *Failover `json:"failover,omitempty"`
}

// ClusterNode is one redis-server of a Cluster.
type ClusterNode struct {
	// Addr is its loopback address, such as 127.0.0.1:40123.
	Addr string `json:"addr"`
	// FirstSlot and LastSlot are the hash slots a primary was given (a
	// replica serves its primary's); ReplicaOf is a replica's primary's
	// address, "" for a primary.
	FirstSlot int    `json:"first_slot"`
	LastSlot  int    `json:"last_slot"`
	ReplicaOf string `json:"replica_of,omitempty"`
}

// Failover is what a flood measured while one primary of the cluster was
// killed (SIGKILL) partway through and its replica took over.
type Failover struct {
	// Killed is the address of the primary killed; KilledAt is when it was
	// gone, and KilledAtS how many seconds into the flood that was.
	// Promoted is the replica that took over.
	Killed    string    `json:"killed"`
	KilledAt  time.Time `json:"killed_at"`
	KilledAtS float64   `json:"killed_at_s"`
	Promoted  string    `json:"promoted"`
	// PromotedAfterS is the seconds from the kill until the replica said
	// role:master (its INFO replication); ServedAgainAfterS until a call
	// for a key of the lost slots, sent after the kill, was decided in
	// Redis again. Each is 0 when it never happened during the flood.
	PromotedAfterS    float64 `json:"promoted_after_s"`
	ServedAgainAfterS float64 `json:"served_again_after_s"`
	// DurationS is the flood's length in seconds; Clients its clients,
	// LostClients those whose key was in the killed primary's slots.
	DurationS   float64 `json:"duration_s"`
	Clients     int     `json:"clients"`
	LostClients int     `json:"lost_clients"`
	// RatePerS and Burst are every client's bucket.
	RatePerS float64 `json:"rate_per_s"`
	Burst    float64 `json:"burst"`
	// ReplicaKeys is how many of the lost clients' buckets the replica held
	// just before the kill (EXISTS on the replica, READONLY): what it had
	// to serve from once promoted.
	ReplicaKeys int `json:"replica_keys"`
	// Decisions is every decision of the flood. OpenLost and OpenSurviving
	// are those made from a worker's local bucket because Redis failed or
	// the worker was backing off, for keys of the lost slots and of the
	// others; AdmittedOpen the admissions among them.
	Decisions     int64 `json:"decisions"`
	OpenLost      int64 `json:"open_lost"`
	OpenSurviving int64 `json:"open_surviving"`
	AdmittedOpen  int64 `json:"admitted_open"`
	// OpenLastAfterS is the seconds from the kill to the last decision
	// made open for a key of the lost slots.
	OpenLastAfterS float64 `json:"open_last_after_s"`
	// RedisOverBound is the admissions Redis decided beyond burst + rate ×
	// time, summed over the lost clients (each client's excess beyond its
	// bound and the tolerance of one take lost in replication); the check
	// wants 0. OverBound is every admission, the local buckets' included,
	// beyond burst + rate × time, summed over all clients: the price of
	// failing open.
	RedisOverBound float64 `json:"redis_over_bound"`
	OverBound      float64 `json:"over_bound"`
	// LongestCallMS is the longest decision in milliseconds, a call to
	// Redis and the local answer after it included; CallTimeoutMS bounds
	// each call to Redis.
	LongestCallMS float64 `json:"longest_call_ms"`
	CallTimeoutMS float64 `json:"call_timeout_ms"`
}
