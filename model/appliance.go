package model

import (
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/bulkhead-dc/bulkhead/units"
)

// Appliance is a shared appliance (Pulsar §3): a key-value store, a file
// store, an encryption box. It sits behind a server's network link (or,
// with Hypervisor, in the hypervisor of its clients' servers) and serves
// requests FIFO, never dropping them. Its actual cost per request
// (service time by type and size) comes from Model, overridden per type by
// Costs; the provider advertises a virtual cost in tokens (VirtualCost;
// default Pulsar Fig. 6(b): requests ≤ 8 KB cost 8K tokens, larger ones
// their size in bytes).
type Appliance struct {
	Name   string `yaml:"name" json:"name"`
	Server string `yaml:"server,omitempty" json:"server,omitempty"`
	// Hypervisor places the appliance in the hypervisor of every server
	// whose VMs use it (Pulsar §2.1, §6: "an encryption appliance inside
	// the hypervisor at each server") instead of behind Server, which is
	// then not allowed: a request reaches the instance on its sender's
	// server without crossing a link. The instances are served as one
	// FIFO pool: Parallelism is their total.
	Hypervisor bool `yaml:"hypervisor,omitempty" json:"hypervisor,omitempty"`
	// Model presets the actual costs: kv, filestore, encryption, or custom
	// (Costs then required). See ModelCosts.
	Model string `yaml:"model" json:"model"`
	// Parallelism is how many requests the appliance serves at once
	// (default 1): its capacity is Parallelism service-seconds per second.
	Parallelism float64 `yaml:"parallelism,omitempty" json:"parallelism,omitempty"`
	// Costs override the model's cost of a type, or add types.
	Costs []ServiceCost `yaml:"costs,omitempty" json:"costs,omitempty"`
	// VirtualCost holds the advertised cost functions, one per type and at
	// most one for all types (Type empty). ApplyDefaults adds Pulsar Fig.
	// 6(b) for all types when no entry covers all types.
	VirtualCost []VirtualCost `yaml:"virtual_cost,omitempty" json:"virtual_cost,omitempty"`
	// CapacityMin and CapacityMax bound a controller's capacity estimate
	// (tokens/s; 0: the controller's default). Validate also checks that
	// the tenants' guarantees on the appliance sum to at most CapacityMax.
	CapacityMin units.Tokens `yaml:"capacity_min,omitempty" json:"capacity_min,omitempty"`
	CapacityMax units.Tokens `yaml:"capacity_max,omitempty" json:"capacity_max,omitempty"`
	// Address and Port are where clients reach a real appliance, and
	// Protocol what it speaks (ProtoRedis, ProtoHTTP): the agents of the
	// hosts whose VMs use it take those VMs' connections to the address
	// and relay them, request by request, through Pulsar's enforcer.
	// Empty for appliances of the simulator only.
	Address  string `yaml:"address,omitempty" json:"address,omitempty"`
	Port     int    `yaml:"port,omitempty" json:"port,omitempty"`
	Protocol string `yaml:"protocol,omitempty" json:"protocol,omitempty"`
}

// Protocols of real appliances (Appliance.Protocol).
const (
	ProtoRedis = "redis" // RESP2/RESP3: a key-value store
	ProtoHTTP  = "http"  // HTTP/1.1: a file store (GET, PUT, HEAD, DELETE)
)

// Protocols lists the protocols a real appliance may speak.
var Protocols = []string{ProtoRedis, ProtoHTTP}

// Endpoint returns where clients reach a real appliance; false for an
// appliance of the simulator only (or an address Validate refuses).
func (a *Appliance) Endpoint() (netip.AddrPort, bool) {
	ip, err := netip.ParseAddr(a.Address)
	if err != nil || a.Port < 1 || a.Port > 65535 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, uint16(a.Port)), true
}

// ServiceCost is the actual cost of one request type: Base + PerKB × size
// in KB (1 KB = 1000 bytes of payload), the time the request occupies one
// of the appliance's Parallelism service slots.
type ServiceCost struct {
	Type  string         `yaml:"type" json:"type"`
	Base  units.Duration `yaml:"base" json:"base"`
	PerKB units.Duration `yaml:"per_kb,omitempty" json:"per_kb,omitempty"`
}

// VirtualCost is an advertised cost function for one request type (all
// types when Type is empty): piecewise linear in the request size through
// Points (flat before the first point, extended with the last segment's
// slope after the last; a single point is a flat cost), the size first
// rounded up to a multiple of Step when Step is set (step functions, e.g.
// "integral multiples of 1 KB").
type VirtualCost struct {
	Type   string      `yaml:"type,omitempty" json:"type,omitempty"`
	Points []CostPoint `yaml:"points" json:"points"`
	Step   units.Bytes `yaml:"step,omitempty" json:"step,omitempty"`
}

// CostPoint is one point of a virtual cost function.
type CostPoint struct {
	Size   units.Bytes  `yaml:"size" json:"size"`
	Tokens units.Tokens `yaml:"tokens" json:"tokens"`
}

// VDC is a tenant's virtual datacenter beyond its VMs' hose guarantees
// (which are its virtual network links): guarantees on virtual appliances
// and the tenant's allocation policy (Pulsar §3, §4.1).
type VDC struct {
	// Fixed guarantees are also maxima: the tenant gets no spare capacity.
	Fixed      bool                 `yaml:"fixed,omitempty" json:"fixed,omitempty"`
	Appliances []ApplianceGuarantee `yaml:"appliances,omitempty" json:"appliances,omitempty"`
	// Policy is the tenant's local allocation among its flows: drf
	// (default), maxmin or firstfit; Weights overrides a flow's local
	// weight, keyed "src->dst" (src a VM of the tenant, dst a VM of the
	// tenant or an appliance in its VDC).
	Policy  string             `yaml:"policy,omitempty" json:"policy,omitempty"`
	Weights map[string]float64 `yaml:"weights,omitempty" json:"weights,omitempty"`
	// GlobalWeight is the tenant's weight for spare capacity (default:
	// derived from its guarantees by the mechanism).
	GlobalWeight float64 `yaml:"global_weight,omitempty" json:"global_weight,omitempty"`
}

// ApplianceGuarantee is a guarantee on a virtual appliance in tokens/s,
// with an optional maximum.
type ApplianceGuarantee struct {
	Appliance string       `yaml:"appliance" json:"appliance"`
	Guarantee units.Tokens `yaml:"guarantee" json:"guarantee"`
	Max       units.Tokens `yaml:"max,omitempty" json:"max,omitempty"`
}

// RequestType is one entry of a request mix: Fraction of the workload's
// requests are of this type and Size (the payload, which the virtual and
// actual costs depend on). Request and Response are the bytes on the wire
// each way; by default (RequestType.Bytes, which spec's ApplyDefaults
// writes into a scenario's mixes) reads (read, get) send a 64-byte request
// and receive Size, writes (write, put, cwrite) send Size and receive 64
// bytes, and transforms (rc4, aes, compress) and any other type send and
// receive Size.
type RequestType struct {
	Type     string      `yaml:"type" json:"type"`
	Size     units.Bytes `yaml:"size" json:"size"`
	Fraction float64     `yaml:"fraction" json:"fraction"`
	Request  units.Bytes `yaml:"request,omitempty" json:"request,omitempty"`
	Response units.Bytes `yaml:"response,omitempty" json:"response,omitempty"`
}

// Appliance models, VDC policies and request types.
const (
	// Models (Appliance.Model).
	ModelKV         = "kv"
	ModelFilestore  = "filestore"
	ModelEncryption = "encryption"
	ModelCustom     = "custom"

	// Local allocation policies (VDC.Policy).
	PolicyDRF      = "drf"
	PolicyMaxMin   = "maxmin"
	PolicyFirstFit = "firstfit"

	// Request types of the presets and of the wire-size defaults.
	ReqGet      = "get"
	ReqPut      = "put"
	ReqRead     = "read"
	ReqWrite    = "write"
	ReqCWrite   = "cwrite" // a compressible write
	ReqRC4      = "rc4"
	ReqAES      = "aes"
	ReqCompress = "compress"

	// HeaderBytes is the default wire size of a request without payload (a
	// read's request, a write's response).
	HeaderBytes = 64
)

// Models lists the known models, in the order error messages give them.
var Models = []string{ModelKV, ModelFilestore, ModelEncryption, ModelCustom}

// Policies lists the known local allocation policies.
var Policies = []string{PolicyDRF, PolicyMaxMin, PolicyFirstFit}

// modelCosts are the presets: per request type, Base + PerKB × KB of
// service time with one service slot. They are assumptions, calibrated so
// that, with the default virtual cost (Fig. 6(b)), capacities land where
// the Pulsar paper reports them; the raw numbers of its Fig. 4 are not in
// its text. docs/scenarios.md gives the derivation and the capacities.
var modelCosts = map[string][]ServiceCost{
	// An in-memory key-value store; GETs and PUTs cost alike (Fig. 4(a),
	// §2.5). Fig. 14(a): Fig. 10's tenant D alone (64 KB requests) gives
	// ≈ 6840 MT/s; with C's 512 B requests at twice D's token share, ≈ 3485.
	ModelKV: {
		{Type: ReqGet, Base: units.Duration(2800 * time.Nanosecond), PerKB: units.Duration(100 * time.Nanosecond)},
		{Type: ReqPut, Base: units.Duration(2800 * time.Nanosecond), PerKB: units.Duration(100 * time.Nanosecond)},
	},
	// An SSD filestore: writes cost more than reads, compressible writes
	// less than incompressible ones (Fig. 4(b)); small requests cost more
	// per token than large ones (Fig. 14(b)). §6.1: C (512 B, 99% writes)
	// and D (64 KB, 56% reads) sharing it 1:1 in tokens get ≈ 1830 MT/s.
	ModelFilestore: {
		{Type: ReqRead, Base: units.Duration(3 * time.Microsecond), PerKB: units.Duration(280 * time.Nanosecond)},
		{Type: ReqWrite, Base: units.Duration(5 * time.Microsecond), PerKB: units.Duration(500 * time.Nanosecond)},
		{Type: ReqCWrite, Base: units.Duration(4 * time.Microsecond), PerKB: units.Duration(350 * time.Nanosecond)},
	},
	// An encryption appliance (Fig. 4(c)): AES costs 3× RC4.
	ModelEncryption: {
		{Type: ReqRC4, Base: units.Duration(400 * time.Nanosecond), PerKB: units.Duration(200 * time.Nanosecond)},
		{Type: ReqAES, Base: units.Duration(1200 * time.Nanosecond), PerKB: units.Duration(600 * time.Nanosecond)},
	},
	ModelCustom: nil,
}

// ModelCosts returns a copy of a model's preset costs (none for custom),
// and whether the model is known.
func ModelCosts(model string) ([]ServiceCost, bool) {
	c, ok := modelCosts[model]
	if !ok {
		return nil, false
	}
	return append([]ServiceCost(nil), c...), true
}

// DefaultVirtualCost is Pulsar Fig. 6(b), the cost function of all types
// unless an appliance says otherwise: requests of at most 8 KB (8000
// bytes) cost 8K tokens, larger ones their size in tokens.
func DefaultVirtualCost() VirtualCost {
	return VirtualCost{Points: []CostPoint{
		{Size: 0, Tokens: 8000}, {Size: 8000, Tokens: 8000}, {Size: 16000, Tokens: 16000},
	}}
}

// Cost evaluates the cost function at a request size (bytes): the size is
// rounded up to a multiple of Step, then interpolated linearly between
// Points, flat before the first, extended with the last segment's slope
// after the last (flat if there is one point). No points cost 0.
func (v VirtualCost) Cost(size float64) float64 {
	if v.Step > 0 {
		size = math.Ceil(size/float64(v.Step)) * float64(v.Step)
	}
	pts := v.Points
	if len(pts) == 0 {
		return 0
	}
	if size <= float64(pts[0].Size) || len(pts) == 1 {
		return float64(pts[0].Tokens)
	}
	i := 1
	for i < len(pts)-1 && size > float64(pts[i].Size) {
		i++
	}
	a, b := pts[i-1], pts[i]
	slope := (float64(b.Tokens) - float64(a.Tokens)) / (float64(b.Size) - float64(a.Size))
	return float64(a.Tokens) + slope*(size-float64(a.Size))
}

// Types lists the request types the appliance serves: its model's, then
// those Costs adds, in order.
func (a *Appliance) Types() []string {
	var out []string
	seen := map[string]bool{}
	add := func(t string) {
		if t != "" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, c := range modelCosts[a.Model] {
		add(c.Type)
	}
	for _, c := range a.Costs {
		add(c.Type)
	}
	return out
}

// ServiceCost returns the actual cost of a request type: the entry of
// Costs for it, else the model's preset; false if the appliance does not
// serve the type.
func (a *Appliance) ServiceCost(typ string) (ServiceCost, bool) {
	for _, c := range a.Costs {
		if c.Type == typ {
			return c, true
		}
	}
	for _, c := range modelCosts[a.Model] {
		if c.Type == typ {
			return c, true
		}
	}
	return ServiceCost{}, false
}

// serviceSeconds is ServiceTime in seconds, unrounded.
func (a *Appliance) serviceSeconds(typ string, size float64) (float64, error) {
	c, ok := a.ServiceCost(typ)
	if !ok {
		return 0, fmt.Errorf("appliance %q: unknown request type %q (use %s)", a.Name, typ, OrList(a.Types()))
	}
	if !(size >= 0) || math.IsInf(size, 0) {
		return 0, fmt.Errorf("appliance %q: invalid request size %v", a.Name, size)
	}
	return c.Base.Std().Seconds() + c.PerKB.Std().Seconds()*size/1000, nil
}

// ServiceTime is the actual cost of one request of the type and size
// (bytes of payload): Base + PerKB × size/1000, the time it occupies one
// service slot (rounded to the nanosecond). It fails for a type the
// appliance does not serve or a negative size.
func (a *Appliance) ServiceTime(typ string, size float64) (time.Duration, error) {
	s, err := a.serviceSeconds(typ, size)
	if err != nil {
		return 0, err
	}
	return time.Duration(math.Round(s * 1e9)), nil
}

// CostFunction returns the virtual cost function of a request type: the
// entry of VirtualCost for the type, else the one for all types, else
// DefaultVirtualCost.
func (a *Appliance) CostFunction(typ string) VirtualCost {
	all := -1
	for i, v := range a.VirtualCost {
		if v.Type == typ && typ != "" {
			return v
		}
		if v.Type == "" && all < 0 {
			all = i
		}
	}
	if all >= 0 {
		return a.VirtualCost[all]
	}
	return DefaultVirtualCost()
}

// Tokens is the virtual cost of one request of the type and size (bytes of
// payload), in tokens: CostFunction(typ).Cost(size).
func (a *Appliance) Tokens(typ string, size float64) float64 {
	return a.CostFunction(typ).Cost(size)
}

// Capacity is the appliance's throughput in tokens/s when fully used by a
// stream of requests drawn from mix (Fraction: share of requests):
// Parallelism × mean tokens per request / mean service time. It fails if
// the mix names a type the appliance does not serve or costs no time.
func (a *Appliance) Capacity(mix []RequestType) (float64, error) {
	var tok, sec float64
	for _, m := range mix {
		s, err := a.serviceSeconds(m.Type, float64(m.Size))
		if err != nil {
			return 0, err
		}
		tok += m.Fraction * a.Tokens(m.Type, float64(m.Size))
		sec += m.Fraction * s
	}
	if !(sec > 0) {
		return 0, fmt.Errorf("appliance %q: the mix costs no service time", a.Name)
	}
	par := a.Parallelism
	if par <= 0 {
		par = 1
	}
	return par * tok / sec, nil
}

// Guarantee returns the VDC's guarantee on the named appliance.
func (v *VDC) Guarantee(appliance string) (ApplianceGuarantee, bool) {
	if v == nil {
		return ApplianceGuarantee{}, false
	}
	for _, g := range v.Appliances {
		if g.Appliance == appliance {
			return g, true
		}
	}
	return ApplianceGuarantee{}, false
}

// Bytes returns the bytes on the wire of one request of this entry, each
// way: Request and Response when set, else the defaults by type (reads
// read, get: HeaderBytes out, Size back; writes write, put, cwrite: Size
// out, HeaderBytes back; rc4, aes, compress and any other type: Size both
// ways).
func (m RequestType) Bytes() (request, response float64) {
	size := float64(m.Size)
	switch m.Type {
	case ReqRead, ReqGet:
		request, response = HeaderBytes, size
	case ReqWrite, ReqPut, ReqCWrite:
		request, response = size, HeaderBytes
	default:
		request, response = size, size
	}
	if m.Request != 0 {
		request = float64(m.Request)
	}
	if m.Response != 0 {
		response = float64(m.Response)
	}
	return request, response
}
