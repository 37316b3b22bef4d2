package results

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerJSON(t *testing.T) {
	s := Server{Mode: "shed", Slots: 8, WorkMS: 100, MaxWaiting: 2000, DeadlineMS: 0, BucketRatePerS: 70, BucketBurst: 20, Workers: 4}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	assert.JSONEq(t, `{"mode":"shed","slots":8,"work_ms":100,"max_waiting":2000,"deadline_ms":0,"bucket_rate_per_s":70,"bucket_burst":20,"workers":4}`, string(b))
	var back Server
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, s, back, "json.Unmarshal(%s)", b)
	assert.True(t, back.Known())
}

// A document written before servers were recorded as data said "server":
// "--mode shed": it still reads, as a description only, and is written back
// as it came, so a signature over it still holds.
func TestServerJSONOld(t *testing.T) {
	in := `{"name":"shed 240/s","server":"--mode shed --max-waiting 2000","server_after_flood":{"received":1}}`
	var r Run
	require.NoError(t, json.Unmarshal([]byte(in), &r))
	require.NotNil(t, r.Server)
	assert.Equal(t, Server{Description: "--mode shed --max-waiting 2000"}, *r.Server)
	assert.False(t, r.Server.Known(), "an old document's server has no settings")
	b, err := json.Marshal(r.Server)
	require.NoError(t, err)
	assert.Equal(t, `"--mode shed --max-waiting 2000"`, string(b))

	var none *Server
	assert.False(t, none.Known(), "nil.Known()")
	var missing Run
	require.NoError(t, json.Unmarshal([]byte(`{"name":"x"}`), &missing))
	assert.Nil(t, missing.Server, "a run without a server")
}
