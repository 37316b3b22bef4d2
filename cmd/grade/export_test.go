package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// grade export refuses bad input with one line and exit 2, writing nothing.
func TestExportUsageErrors(t *testing.T) {
	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "x"), nil, 0o644))
	file := filepath.Join(full, "x")
	for _, args := range [][]string{
		{"export"},
		{"export", "a", "b"},
		{"export", full},
		{"export", file},
	} {
		code, _, errOut := runCapture(t, context.Background(), args...)
		assert.Equal(t, exitUsage, code, "grade %s: %s", strings.Join(args, " "), errOut)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "grade %s: one line: %q", strings.Join(args, " "), errOut)
	}
	entries, err := os.ReadDir(full)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "a refused export writes nothing")
}
