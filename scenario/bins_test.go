package scenario

import "testing"

func TestPeakToMean(t *testing.T) {
	tests := []struct {
		bins []int64
		upto int
		want float64
	}{
		{[]int64{400, 50, 50, 50, 50}, 5, 1},             // even after the opening burst
		{[]int64{400, 200, 0, 0, 0, 200, 0, 0, 0}, 9, 4}, // two waves, silence between
		{[]int64{400, 10, 30}, 3, 1.5},
		{[]int64{400, 10, 30, 5, 5}, 3, 1.5}, // bins after the last success are left out
		{[]int64{400}, 1, 0},
		{[]int64{400, 0, 0}, 3, 0},
	}
	for _, tt := range tests {
		if got := PeakToMean(tt.bins, tt.upto); got != tt.want {
			t.Errorf("PeakToMean(%v, %d) = %v; want %v", tt.bins, tt.upto, got, tt.want)
		}
	}
}

func TestEmptyShare(t *testing.T) {
	tests := []struct {
		bins       []int64
		from, upto int
		want       float64
	}{
		{[]int64{400, 9, 0, 0, 5, 0, 0, 0, 7}, 1, 9, 0.625},
		{[]int64{400, 9, 3, 2, 5}, 1, 5, 0},
		{[]int64{400, 9, 0, 0}, 1, 99, 2.0 / 3}, // upto beyond the bins
		{[]int64{400}, 1, 1, 0},
	}
	for _, tt := range tests {
		if got := EmptyShare(tt.bins, tt.from, tt.upto); got != tt.want {
			t.Errorf("EmptyShare(%v, %d, %d) = %v; want %v", tt.bins, tt.from, tt.upto, got, tt.want)
		}
	}
}
