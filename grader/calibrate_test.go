package grader

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCalibrate(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for a second")
	}
	c, err := Calibrate(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(480), c.Expected)
	assert.Equal(t, c.OK, c.Reason == "", "a failed calibration says why: %+v", c)
	assert.Positive(t, c.SleepOverMS+1, "sleep overshoot measured")
}
