package spec

import (
	"strings"
	"testing"
	"time"
)

// TestParamReader: absent parameters keep the field's value, present ones
// replace it, and every problem is reported, not only the first.
func TestParamReader(t *testing.T) {
	cfg := struct {
		period time.Duration
		rate   float64
		alpha  float64
		on     bool
		mode   string
	}{period: time.Second, rate: 1e9, alpha: 0.5, on: true, mode: "a"}
	r := Params{"period": "15ms", "rate": "x", "alpha": true, "mode": "b"}.Reader()
	r.Duration(&cfg.period, "period")
	r.Rate(&cfg.rate, "rate")
	r.Float(&cfg.alpha, "alpha")
	r.Bool(&cfg.on, "on")
	r.String(&cfg.mode, "mode")
	if cfg.period != 15*time.Millisecond || cfg.mode != "b" || !cfg.on {
		t.Errorf("read %+v, want period 15ms, mode b, on kept", cfg)
	}
	if cfg.rate != 1e9 || cfg.alpha != 0.5 {
		t.Errorf("fields with bad values changed: %+v", cfg)
	}
	err := r.Err()
	if err == nil {
		t.Fatal("no error for two bad parameters")
	}
	for _, want := range []string{"mechanism.params.rate", "mechanism.params.alpha"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if (Params{}).Reader().Err() != nil {
		t.Error("an empty reader reports an error")
	}
}
