package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Burst sends one request per client id, each with its X-Client-Id.
func TestBurstSendsOneRequestPerClient(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Client-Id")]++
		mu.Unlock()
	}))
	defer srv.Close()
	ids := []string{"a", "b", "c", "d", "e"}
	require.NoError(t, Burst(context.Background(), BurstOptions{URL: srv.URL, IDs: ids, Concurrency: 2}))
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}, seen)
}
