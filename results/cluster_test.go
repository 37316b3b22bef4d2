package results

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A document keeps the cluster's topology and failover through Encode,
// Decode and DecodeBrief, and a repeat keeps its first one.
func TestClusterRoundTrips(t *testing.T) {
	doc := &Document{Schema: Schema, Task: "task6", Impl: "solutions", Cluster: &Cluster{
		Primaries:     []ClusterNode{{Addr: "127.0.0.1:1", FirstSlot: 0, LastSlot: 5460}},
		Replicas:      []ClusterNode{{Addr: "127.0.0.1:4", FirstSlot: 0, LastSlot: 5460, ReplicaOf: "127.0.0.1:1"}},
		NodeTimeoutMS: 1000,
		Failover: &Failover{Killed: "127.0.0.1:1", KilledAt: time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC), KilledAtS: 1.5, Promoted: "127.0.0.1:4", PromotedAfterS: 2.5,
			ServedAgainAfterS: 2.8, LostClients: 16, ReplicaKeys: 16, OpenLost: 1000, LongestCallMS: 230},
	}}
	doc.Total()
	var buf bytes.Buffer
	require.NoError(t, doc.Encode(&buf))
	back, err := Decode(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, doc.Cluster, back.Cluster)
	brief, err := DecodeBrief(buf.Bytes())
	require.NoError(t, err)
	assert.Equal(t, doc.Cluster, brief.Cluster)
	assert.Contains(t, buf.String(), `"promoted_after_s": 2.5`)
}
