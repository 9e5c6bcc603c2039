package seqloss_test

import (
	"context"
	"log/slog"
	"time"

	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/dataplane/seqloss"
)

// A host agent in a testbed server namespace: stamp on the uplink, count
// toward each local VM, and read the loss per pair every interval.
func Example() {
	ctx := context.Background()
	ns, err := dataplane.OpenNS("bh-n-server0")
	if err != nil {
		slog.Error("open namespace", "err", err)
		return
	}
	defer ns.Close()
	p, err := seqloss.New(ns, seqloss.Config{})
	if err != nil {
		slog.Error("load", "err", err)
		return
	}
	defer p.Close() // detaches
	if err := p.AttachStamp("bhl0a", dataplane.Egress); err != nil {
		slog.Error("attach", "err", err)
		return
	}
	for _, vmVeth := range []string{"bhv0h", "bhv1h"} {
		if err := p.AttachCount(vmVeth, dataplane.Egress); err != nil {
			slog.Error("attach", "err", err)
			return
		}
	}
	prev := map[dataplane.Pair]seqloss.Received{}
	tick := time.NewTicker(15 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now, err := p.Received()
		if err != nil {
			slog.Error("read counters", "err", err)
			return
		}
		for pair, r := range now {
			if lost := r.Lost(prev[pair]); lost > 0 {
				slog.Info("loss", "pair", pair, "segments", lost) // feedback to the sender's host
			}
		}
		prev = now
	}
}
