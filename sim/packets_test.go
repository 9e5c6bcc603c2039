package sim

import "testing"

func TestWholePackets(t *testing.T) {
	tests := []struct {
		name      string
		acc       float64
		adds      []float64
		wantTotal float64
		wantAcc   float64
	}{
		{"nothing lost", 0, []float64{0, 0, 0}, 0, 0},
		{"fractions add up to one packet", 0, []float64{0.25, 0.25, 0.25, 0.25}, 1, 0},
		{"a phase brings the first packet forward", 0.9, []float64{0.125}, 1, 0.025},
		{"several packets in one tick", 0.5, []float64{3.75}, 4, 0.25},
		{"below one packet nothing is seen", 0, []float64{0.3, 0.3, 0.3}, 0, 0.9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acc, total := tt.acc, 0.0
			for _, n := range tt.adds {
				w := wholePackets(&acc, n)
				if w != float64(int(w)) || w < 0 {
					t.Fatalf("wholePackets returned %g, want a whole non-negative count", w)
				}
				total += w
			}
			if total != tt.wantTotal {
				t.Errorf("total %g, want %g", total, tt.wantTotal)
			}
			if d := acc - tt.wantAcc; d > 1e-12 || d < -1e-12 {
				t.Errorf("carried %g, want %g", acc, tt.wantAcc)
			}
		})
	}
}
