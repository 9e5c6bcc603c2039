package tokenbucket

import (
	"testing"
	"time"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func fired(ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestFakeClock(t *testing.T) {
	c := NewFakeClock(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	if !fired(c.After(0)) || !fired(c.After(-time.Second)) {
		t.Fatal("After(<=0) not ready at once")
	}
	a := c.After(20 * time.Millisecond)
	b := c.After(10 * time.Millisecond)
	if n := c.Timers(); n != 2 {
		t.Fatalf("Timers = %d, want 2", n)
	}
	c.BlockUntilTimers(2) // already satisfied: returns at once
	c.Advance(9 * time.Millisecond)
	if fired(a) || fired(b) {
		t.Fatal("timer fired early")
	}
	c.Advance(time.Millisecond)
	if fired(a) {
		t.Fatal("20 ms timer fired at 10 ms")
	}
	select {
	case at := <-b:
		if want := t0.Add(10 * time.Millisecond); !at.Equal(want) {
			t.Fatalf("10 ms timer got %v, want %v", at, want)
		}
	default:
		t.Fatal("10 ms timer did not fire at 10 ms")
	}
	c.Advance(-time.Second) // ignored
	c.Set(t0)               // backwards: ignored
	if got := c.Now(); !got.Equal(t0.Add(10 * time.Millisecond)) {
		t.Fatalf("clock moved backwards to %v", got)
	}
	c.Set(t0.Add(time.Second))
	if !fired(a) || c.Timers() != 0 {
		t.Fatal("Set did not fire the 20 ms timer")
	}

	// BlockUntilTimers returns once another goroutine arms a timer.
	done := make(chan struct{})
	go func() {
		c.BlockUntilTimers(1)
		close(done)
	}()
	ch := c.After(time.Second)
	<-done
	c.Advance(time.Second)
	if !fired(ch) {
		t.Fatal("timer did not fire")
	}
}

func TestRealClock(t *testing.T) {
	var c TimerClock = RealClock{}
	if c.Now().IsZero() {
		t.Fatal("RealClock.Now is zero")
	}
	<-c.After(0)
}
