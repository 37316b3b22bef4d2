package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTallyCountsEveryRunOfATopLevelTest(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"pass","Package":"p","Test":"TestA/sub","Elapsed":0.5}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1}`,
		`{"Action":"fail","Package":"p","Test":"TestA","Elapsed":2}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1}`,
		`{"Action":"pass","Package":"p","Test":"TestB","Elapsed":4}`,
		`{"Action":"skip","Package":"p","Test":"TestC"}`,
		`panic: the binary's own text`,
		`{"Action":"fail","Package":"p","Elapsed":9}`,
	}, "\n")
	counts, err := tally(strings.NewReader(in))
	require.NoError(t, err)
	var b strings.Builder
	write(&b, counts)
	assert.Equal(t, "FAIL p TestA: 3 runs, 1 failed, 4.0 s\n"+
		"ok   p TestB: 1 runs, 0 failed, 4.0 s\n"+
		"skip p TestC: skipped 1 times\n"+
		"2 tests, 4 runs, 1 failed\n", b.String())
}

func TestTallyNamesAPackageThatFailedWithNoTest(t *testing.T) {
	in := `{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1}` + "\n" +
		`{"Action":"fail","Package":"p","Elapsed":600}`
	counts, err := tally(strings.NewReader(in))
	require.NoError(t, err)
	var b strings.Builder
	write(&b, counts)
	assert.Contains(t, b.String(), "FAIL p: the test binary failed with no test failing")
}
