package results

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, m := range v {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

// sparse returns n counts, zero but for those in at.
func sparse(n int, at map[int]int64) []int64 {
	c := make([]int64, n)
	for k, v := range at {
		c[k] = v
	}
	return c
}

func TestJudgeNewTimeline(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ok, failed []time.Duration
		want       *JudgeTimeline
	}{
		{"nothing returned", nil, nil, nil},
		{"one call at once", ms(0), nil, &JudgeTimeline{BinMS: 250, OK: []int64{1}}},
		{"bins are half-open", ms(0, 249, 250, 499, 500), nil, &JudgeTimeline{BinMS: 250, OK: []int64{2, 2, 1}}},
		{"empty bins between", ms(100, 1100), nil, &JudgeTimeline{BinMS: 250, OK: []int64{1, 0, 0, 0, 1}}},
		{"failures share the bins", ms(100), ms(50, 600), &JudgeTimeline{BinMS: 250, OK: []int64{1, 0, 0}, Failed: []int64{1, 0, 1}}},
		{"only failures", nil, ms(300), &JudgeTimeline{BinMS: 250, OK: []int64{0, 0}, Failed: []int64{0, 1}}},
		{"a time below zero counts first", ms(-5, 10), nil, &JudgeTimeline{BinMS: 250, OK: []int64{2}}},
		{"the last bin of five minutes", ms(0, 299_999), nil, &JudgeTimeline{BinMS: 250, OK: sparse(MaxJudgeTimelineBins, map[int]int64{0: 1, 1199: 1})}},
		{"longer runs widen the bins", ms(0, 300_000, 599_999), nil, &JudgeTimeline{BinMS: 500, OK: sparse(MaxJudgeTimelineBins, map[int]int64{0: 1, 600: 1, 1199: 1})}},
		{"and widen again", ms(0, 600_000), nil, &JudgeTimeline{BinMS: 1000, OK: sparse(601, map[int]int64{0: 1, 600: 1})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NewJudgeTimeline(tc.ok, tc.failed)
			if tc.want == nil || got == nil {
				assert.Equal(t, tc.want, got, "NewJudgeTimeline(%v, %v)", tc.ok, tc.failed)
				return
			}
			// Compared field by field: a diff of 1,200 counts is unreadable.
			assert.Equal(t, tc.want.BinMS, got.BinMS, "NewJudgeTimeline(%v, %v).BinMS", tc.ok, tc.failed)
			assert.Equal(t, nonZero(tc.want.OK), nonZero(got.OK), "NewJudgeTimeline(%v, %v).OK: bin → count", tc.ok, tc.failed)
			assert.Equal(t, nonZero(tc.want.Failed), nonZero(got.Failed), "NewJudgeTimeline(%v, %v).Failed: bin → count", tc.ok, tc.failed)
			assert.Len(t, got.OK, len(tc.want.OK), "bins of OK")
			assert.Len(t, got.Failed, len(tc.want.Failed), "bins of Failed")
			assert.Equal(t, tc.want.Failed == nil, got.Failed == nil, "Failed is nil exactly when nothing failed")
		})
	}
}

// nonZero maps the bins of c that are not empty to their counts.
func nonZero(c []int64) map[int]int64 {
	m := map[int]int64{}
	for k, v := range c {
		if v != 0 {
			m[k] = v
		}
	}
	return m
}

// A report from before the timeline still reads, with none; a timeline
// without failures leaves them out.
func TestJudgeTimelineJSON(t *testing.T) {
	var old JudgeStrategy
	require.NoError(t, json.Unmarshal([]byte(`{"name":"polite","n":2,"completed":2,"client":{"ok":2,"failed":0,"unfinished":0}}`), &old))
	assert.Nil(t, old.Timeline)
	b, err := json.Marshal(old)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "timeline")

	b, err = json.Marshal(NewJudgeTimeline(ms(10, 260, 270), nil))
	require.NoError(t, err)
	assert.JSONEq(t, `{"bin_ms":250,"ok":[1,2]}`, string(b))
}
