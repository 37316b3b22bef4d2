package loopback

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListenServeClose(t *testing.T) {
	closed := 0
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	s, err := Listen(h, "127.0.0.1:0", func() { closed++ })
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(s.URL, "http://127.0.0.1:"), s.URL)

	resp, err := http.Get(s.URL)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "ok", string(body))

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	assert.Equal(t, 1, closed, "onClose runs once")
	_, err = http.Get(s.URL)
	assert.Error(t, err, "nothing listens after Close")
}

func TestShutdownThenClose(t *testing.T) {
	s, err := Listen(http.NotFoundHandler(), "127.0.0.1:0", nil)
	require.NoError(t, err)
	require.NoError(t, s.Shutdown(context.Background()))
	require.NoError(t, s.Close())
}

func TestListenBadAddress(t *testing.T) {
	_, err := Listen(http.NotFoundHandler(), "127.0.0.1:99999", nil)
	assert.ErrorContains(t, err, "listen on 127.0.0.1:99999")
}
