package hostpath

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/datapath"

	"github.com/bulkhead-dc/bulkhead/datapath/linux"
	"github.com/bulkhead-dc/bulkhead/dataplane"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
)

// byCaps returns the first mechanism of the registry (mech/all) that runs
// on real hosts and whose capabilities satisfy ok.
func byCaps(t *testing.T, ok func(mech.Capabilities) bool) string {
	t.Helper()
	for _, n := range all.Names() {
		m, err := all.New(n, nil)
		if err != nil {
			continue
		}
		if c := m.Capabilities(); ok(c) {
			if rt, _ := c.RealTraffic(); rt {
				return n
			}
		}
	}
	t.Fatal("no mechanism of the registry has the capabilities")
	return ""
}

// schedulers: a mechanism with per-VM schedulers (Gatekeeper).
func schedulers(c mech.Capabilities) bool { return c.Schedulers }

// lossesOnly: one that reacts to losses without schedulers (ElasticSwitch,
// Seawall).
func lossesOnly(c mech.Capabilities) bool { return c.Losses && !c.Schedulers }

// TestPathNeedsUplinks: a mechanism with per-VM schedulers is made for a
// real host, and its data path, like the sequence-gap loss counter's,
// needs the server's uplinks, refused clearly without them (before
// anything is opened); one with neither needs none.
func TestPathNeedsUplinks(t *testing.T) {
	sched, loss := byCaps(t, schedulers), byCaps(t, lossesOnly)
	for _, c := range []struct {
		mech, loss string
		want       string // "" when no uplink is needed
	}{
		{sched, "", "the ingress scheduler needs the server's uplinks (--uplink)"},
		{loss, LossSeq, "the sequence-number counter needs the server's uplinks (--uplink)"},
		{loss, LossTCP, ""},
	} {
		o := Options{Loss: c.loss}
		m, err := o.Mechanism(c.mech, nil)
		if err != nil {
			t.Errorf("%s: %v", c.mech, err)
			continue
		}
		if c.want == "" {
			continue
		}
		if h, err := o.Path(nil, m); err == nil || !strings.Contains(err.Error(), c.want) {
			if h != nil {
				_ = h.Close()
			}
			t.Errorf("%s without uplinks: %v; want %q", c.mech, err, c.want)
		}
	}
}

// TestPathSchedulers: the data path of a mechanism with per-VM schedulers
// builds the schedulers' IFBs in the server's namespace and has a
// scheduler in each direction; closing it removes them, and the uplink
// is left without a qdisc or filter of its own.
func TestPathSchedulers(t *testing.T) {
	if err := dataplane.RequireRoot(); err != nil {
		t.Fatalf("integration test needs root: %v", err)
	}
	prefix := dataplane.RandomPrefix("hp")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := dataplane.Cleanup(ctx, prefix); err != nil {
			t.Errorf("cleanup %s: %v", prefix, err)
		}
	})
	srv, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+"s", dataplane.NSOptions{Forwarding: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	peer, err := dataplane.CreateNS(dataplane.NSPrefix(prefix)+"n", dataplane.NSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Close)
	up := prefix + "u"
	if err := srv.AddVeth(up, peer, prefix+"n"); err != nil {
		t.Fatal(err)
	}
	o := Options{Netns: srv.Name, Uplinks: []string{up}}
	m, err := o.Mechanism(byCaps(t, schedulers), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := o.Path(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []mech.Direction{mech.Egress, mech.Ingress} {
		if h.Scheduler(d) == nil {
			t.Errorf("no %v scheduler", d)
		}
	}
	for _, ifb := range []string{linux.SchedTXIFB, linux.SchedRXIFB} {
		if found, isIFB, err := srv.IsIFB(ifb); err != nil || !found || !isIFB {
			t.Errorf("IFB %s: found %v, an IFB %v, %v", ifb, found, isIFB, err)
		}
	}
	// closed (its agent stopped), the schedulers stay in force; the next
	// data path takes them over, and removed, nothing is left
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ifb := range []string{linux.SchedTXIFB, linux.SchedRXIFB} {
		if found, isIFB, err := srv.IsIFB(ifb); err != nil || !found || !isIFB {
			t.Errorf("IFB %s after close: found %v, an IFB %v, %v", ifb, found, isIFB, err)
		}
	}
	if h, err = o.Path(nil, m); err != nil {
		t.Fatalf("a data path over what a closed one left: %v", err)
	}
	if err := h.(datapath.Remover).Remove(); err != nil {
		t.Fatal(err)
	}
	for _, ifb := range []string{linux.SchedTXIFB, linux.SchedRXIFB} {
		if found, _, err := srv.IsIFB(ifb); err != nil || found {
			t.Errorf("IFB %s after remove: found %v, %v", ifb, found, err)
		}
	}
	if ok, err := srv.HasClsact(up); err != nil || ok {
		t.Errorf("uplink's clsact after remove: %v, %v", ok, err)
	}
	if q, err := srv.RootQdisc(up); err != nil || !q.Default() {
		t.Errorf("uplink's root qdisc after remove: %v, %v", q, err)
	}
}
