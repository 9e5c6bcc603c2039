package spec

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestSizeSampler(t *testing.T) {
	cdf := []CDFPoint{{Size: 1000, P: 0.5}, {Size: 3000, P: 1}}
	tests := []struct {
		name string
		d    SizeDist
		mean float64 // want the sample mean within 3% (0: skip)
		min  float64 // every sample ≥ min
		err  string
	}{
		{"fixed", SizeDist{Dist: "fixed", Mean: 5000}, 5000, 5000, ""},
		{"exponential", SizeDist{Dist: "exponential", Mean: 10000}, 10000, 1, ""},
		{"lognormal", SizeDist{Dist: "lognormal", Mean: 10000, Shape: 0.5}, 10000, 0, ""},
		{"pareto", SizeDist{Dist: "pareto", Mean: 10000, Shape: 3}, 10000, 10000 * 2 / 3, ""},
		{"cdf", SizeDist{Dist: "cdf", CDF: cdf}, 0.5*1000 + 0.5*2000, 1000, ""},
		{"pareto infinite mean", SizeDist{Dist: "pareto", Mean: 10000, Shape: 1}, 0, 0, "must exceed 1"},
		{"empty cdf", SizeDist{Dist: "cdf"}, 0, 0, "empty cdf"},
		{"unknown", SizeDist{Dist: "zipf", Mean: 1}, 0, 0, `unknown distribution "zipf"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.d.Sampler()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			const n = 200000
			sum := 0.0
			for range n {
				x := f(r)
				if x < tc.min {
					t.Fatalf("sample %g below %g", x, tc.min)
				}
				sum += x
			}
			if got := sum / n; tc.mean > 0 && math.Abs(got-tc.mean) > 0.03*tc.mean {
				t.Errorf("sample mean %.0f, want %.0f ± 3%%", got, tc.mean)
			}
		})
	}
}
