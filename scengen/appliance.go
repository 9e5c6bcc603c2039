package scengen

import (
	"fmt"
	"math"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// appDraft is an appliance behind a server of its own.
type appDraft struct {
	name, model, server string
	// slow is the factor its preset costs are multiplied by (1: the
	// preset), so that it can be the bottleneck of its tenants at the
	// topology's link rate.
	slow  float64
	users []*appUse
}

// appUse is an appliance tenant's use of its appliance.
type appUse struct {
	app *appDraft
	mix mix
	// weight is the tenant's share of the appliance's guarantees;
	// guarantee its guarantee there, tokens/s; standIn and standOut the
	// hose of the tenant's stand-in VM at the appliance's server for
	// admission (bits/s).
	weight            float64
	guarantee         float64
	standIn, standOut float64
	closed            bool
	aggressive        bool
}

func (u *appUse) loop() string {
	if u.closed {
		return "closed loop"
	}
	return "open loop"
}

// mix is a named request mix of Pulsar's workloads (§6, Fig. 10).
type mix struct {
	name    string
	entries []spec.RequestType
}

// mixes lists the request mixes an appliance model serves: Pulsar's
// Database IO (8 KB, 61% reads), Transactional log (512 B, 1% reads) and
// Email (64 KB, 56% reads) on stores; RC4 and AES on encryption.
func mixes(m string) []mix {
	rw := func(read, write string) []mix {
		return []mix{
			{"database", []spec.RequestType{{Type: read, Size: 8000, Fraction: 0.61}, {Type: write, Size: 8000, Fraction: 0.39}}},
			{"translog", []spec.RequestType{{Type: read, Size: 512, Fraction: 0.01}, {Type: write, Size: 512, Fraction: 0.99}}},
			{"email", []spec.RequestType{{Type: read, Size: 64000, Fraction: 0.56}, {Type: write, Size: 64000, Fraction: 0.44}}},
		}
	}
	switch m {
	case spec.ModelKV:
		return rw(spec.ReqGet, spec.ReqPut)
	case spec.ModelFilestore:
		return rw(spec.ReqRead, spec.ReqWrite)
	default:
		return []mix{
			{"rc4-64k", []spec.RequestType{{Type: spec.ReqRC4, Size: 64000, Fraction: 1}}},
			{"aes-8k", []spec.RequestType{{Type: spec.ReqAES, Size: 8000, Fraction: 1}}},
		}
	}
}

// appliances places one appliance (medium appliance scenarios: one or
// two) behind servers VMs do not use: a key-value store, a filestore or,
// now and then, an encryption box.
func (g *gen) appliances() {
	n := 1
	if g.o.Size == Medium && g.o.Kind == Appliance && g.chance(0.5) {
		n = 2
	}
	used := map[string]int{}
	for i := range n {
		m := spec.ModelKV
		switch x := g.rng.Float64(); {
		case x < 0.45:
		case x < 0.9:
			m = spec.ModelFilestore
		default:
			m = spec.ModelEncryption
		}
		short := map[string]string{spec.ModelKV: "kv", spec.ModelFilestore: "fs", spec.ModelEncryption: "enc"}[m]
		used[short]++
		name := short
		if used[short] > 1 {
			name = fmt.Sprintf("%s%d", short, used[short])
		}
		// The last servers, so that VMs keep s1, s2, ...
		server := g.servers[len(g.servers)-1-i]
		g.apps = append(g.apps, &appDraft{name: name, model: m, server: server, slow: 1})
	}
	g.vmHosts = g.servers[:len(g.servers)-n]
}

// applianceTenant adds a tenant of one to four VMs that sends requests of
// one mix to one appliance; its guarantees and requests come once every
// tenant is drawn (guarantees, requests).
func (g *gen) applianceTenant() {
	t := g.newTenant()
	a := g.apps[g.rng.IntN(len(g.apps))]
	ms := mixes(a.model)
	u := &appUse{app: a, mix: ms[g.rng.IntN(len(ms))], closed: g.chance(0.5), aggressive: g.chance(0.25)}
	a.users = append(a.users, u)
	t.use = u
	t.pattern = "requests-" + u.mix.name
	for range g.between(1, 4) {
		t.addVM(g.server())
	}
	u.weight = g.uniform(1, 4)
}

// modelAppliance returns the appliance as the model sees it (defaults
// applied).
func (a *appDraft) modelAppliance() *model.Appliance {
	s := a.spec()
	s.ApplyDefaults()
	return &s
}

// spec writes the appliance: the preset model, its costs multiplied by
// slow when it is slowed down.
func (a *appDraft) spec() spec.Appliance {
	s := spec.Appliance{Name: a.name, Server: a.server, Model: a.model}
	if a.slow > 1 {
		costs, _ := spec.ModelCosts(a.model)
		for _, c := range costs {
			c.Base = spec.Duration(math.Round(float64(c.Base) * a.slow))
			c.PerKB = spec.Duration(math.Round(float64(c.PerKB) * a.slow))
			s.Costs = append(s.Costs, c)
		}
	}
	return s
}

// wire returns a mix's bytes on the wire per token, each way.
func wire(a *model.Appliance, m mix) (req, resp float64) {
	var tok float64
	for _, e := range m.entries {
		q, r := e.Bytes()
		req += e.Fraction * q
		resp += e.Fraction * r
		tok += e.Fraction * a.Tokens(e.Type, float64(e.Size))
	}
	return req / tok, resp / tok
}

// sizeAppliance draws how fast the appliance is: when its tenants' mixes
// at the preset's speed would move more than target bits/s each way (a
// fraction of the access link drawn in [0.3, 1.5]), its costs are
// multiplied so that they move target: the appliance is then the
// bottleneck of its tenants about as often as the network is.
func (g *gen) sizeAppliance(a *appDraft) {
	a.slow = 1
	ma := a.modelAppliance()
	worst := 0.0
	for _, u := range a.users {
		c, err := ma.Capacity(u.mix.entries)
		if err != nil {
			continue
		}
		q, r := wire(ma, u.mix)
		worst = max(worst, c*max(q, r)*8)
	}
	target := g.uniform(0.3, 1.5) * g.edge
	if worst > target {
		a.slow = math.Ceil(worst/target*100) / 100
	}
}

// guarantees turns every appliance's tenants' weights into guarantees: a
// fill drawn in [0.4, 0.85] of the capacity the appliance has for the
// least favourable of their mixes, shared by weight; and sizes each
// tenant's hoses (its VMs' and its stand-in's) to carry its guarantee
// with a margin of 25%.
func (g *gen) guarantees() {
	for _, a := range g.apps {
		if len(a.users) == 0 {
			continue
		}
		g.sizeAppliance(a)
		ma := a.modelAppliance()
		capMin := math.Inf(1)
		sum := 0.0
		for _, u := range a.users {
			c, err := ma.Capacity(u.mix.entries)
			if err == nil {
				capMin = min(capMin, c)
			}
			sum += u.weight
		}
		fill := g.uniform(0.4, 0.85)
		g.notes = append(g.notes, fmt.Sprintf("%s guarantees %.0f%% of its capacity (%s tokens/s for the slowest mix)", a.name, 100*fill, spec.FormatTokens(capMin)))
		for _, u := range a.users {
			u.guarantee = fill * capMin * u.weight / sum
			q, r := wire(ma, u.mix)
			const margin = 1.25
			u.standIn = margin * u.guarantee * q * 8
			u.standOut = margin * u.guarantee * r * 8
		}
	}
	for _, t := range g.tenants {
		if u := t.use; u != nil {
			n := float64(len(t.vms))
			t.out = max(1e6, u.standIn/n)
			t.in = max(1e6, u.standOut/n)
		}
	}
}

// requests writes the appliance tenants' workloads once their guarantees
// are final: every VM of the tenant sends requests of its mix, so that
// the tenant demands more than its guarantee even alone. An open loop
// sends at 1.3-3× the guarantee (an aggressive one at 3-6×); a closed
// loop keeps enough requests outstanding for twice the guarantee with
// 300 µs of round trip besides service and transfer at the VM's
// guaranteed rate (an aggressive one at least 32).
func (g *gen) requests() {
	for _, t := range g.tenants {
		u := t.use
		if u == nil {
			continue
		}
		ma := u.app.modelAppliance()
		n := float64(len(t.vms))
		// Mean tokens, service time and transfer time (at the VM's
		// guaranteed rates) per request.
		var tok, svc, xfer float64
		for _, e := range u.mix.entries {
			tok += e.Fraction * ma.Tokens(e.Type, float64(e.Size))
			d, _ := ma.ServiceTime(e.Type, float64(e.Size))
			svc += e.Fraction * d.Seconds()
			q, r := e.Bytes()
			xfer += e.Fraction * (q*8/t.out + r*8/t.in)
		}
		u.guarantee = roundTokens(u.guarantee)
		w := spec.Workload{Kind: spec.KindRequests, Src: nil, Appliance: u.app.name, Mix: u.mix.entries}
		for _, v := range t.vms {
			w.Src = append(w.Src, v.name)
		}
		perVM := u.guarantee / n // tokens/s
		if u.closed {
			rtt := (300 * time.Microsecond).Seconds() + svc + xfer
			out := int(math.Ceil(2 * perVM * rtt / tok))
			out = max(out, g.between(1, 8))
			if u.aggressive {
				out = max(out, g.between(32, 64))
			}
			w.Outstanding = min(out, 512)
		} else {
			f := g.uniform(1.3, 3)
			if u.aggressive {
				f = g.uniform(3, 6)
			}
			w.RequestRate = math.Ceil(f * perVM / tok)
		}
		if u.aggressive && g.chance(0.5) {
			w.Connections = g.between(4, 8)
		}
		t.workload(w)
	}
}
