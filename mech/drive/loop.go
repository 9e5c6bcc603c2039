package drive

import (
	"context"
	"time"
)

// Pacer times the steps of a driver that runs in real time (a host agent):
// steps are due every period from a start. A step that runs more than a
// period late skips the periods it missed; and a late step does not make
// the next window short: the next step is at least half a period after
// it, since counters advance by whole packets (offload packets of up to
// 64 KB) and a tiny window would show absurd rates.
type Pacer struct {
	period time.Duration
	due    time.Time
}

// NewPacer returns the timing of steps every period (> 0) after start:
// the first is due at start + period.
func NewPacer(start time.Time, period time.Duration) *Pacer {
	return &Pacer{period: period, due: start.Add(period)}
}

// Due is when the next step is due.
func (p *Pacer) Due() time.Time { return p.due }

// Step records a step that starts at now and returns when to start the
// next one, and whether this one was more than a period late (periods
// were skipped).
func (p *Pacer) Step(now time.Time) (next time.Time, skipped bool) {
	if now.Sub(p.due) > p.period {
		skipped = true
		p.due = now // skip the periods missed
	}
	p.due = p.due.Add(p.period)
	next = p.due
	if earliest := now.Add(p.period / 2); next.Before(earliest) {
		next = earliest
	}
	return next, skipped
}

// Pace calls step at the times p gives until ctx ends, with the time the
// step starts and whether periods were skipped before it. It returns
// ctx's error.
func Pace(ctx context.Context, p *Pacer, step func(now time.Time, skipped bool)) error {
	timer := time.NewTimer(time.Until(p.Due()))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		now := time.Now()
		next, skipped := p.Step(now)
		timer.Reset(time.Until(next))
		step(now, skipped)
	}
}
