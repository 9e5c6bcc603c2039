package agentd

import (
	"math"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/controlpb"
)

// TestActionsPeriod: a step's period from the controller's actions times
// the next report only when it is a positive number of seconds up to a
// minute; anything else leaves the reports on their own timer.
func TestActionsPeriod(t *testing.T) {
	for _, c := range []struct {
		period float64
		last   bool
		want   time.Duration // 0: not taken
	}{
		{0.1, true, 100 * time.Millisecond},
		{1, true, time.Second},
		{60, true, time.Minute},
		{1, false, 0}, // not the step's last part
		{0, true, 0},
		{-1, true, 0},
		{61, true, 0},
		{math.Inf(1), true, 0},
		{math.NaN(), true, 0},
	} {
		d := &Daemon{stepped: make(chan time.Duration, 1)}
		d.takeActions(&controlpb.Actions{Seq: 1, Last: c.last, Period: c.period})
		var got time.Duration
		select {
		case got = <-d.stepped:
		default:
		}
		if got != c.want {
			t.Errorf("period %v (last %v): next report timed to %v, want %v", c.period, c.last, got, c.want)
		}
	}
}
