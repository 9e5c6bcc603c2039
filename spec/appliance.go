package spec

// Appliance is a shared appliance (Pulsar §3): a key-value store, a file
// store, an encryption box. It sits behind a server's network link and
// serves requests FIFO, never dropping them. Its actual cost per request
// (service time by type and size) comes from Model, overridden per type by
// Costs; the provider advertises a virtual cost in tokens (VirtualCost;
// default Pulsar Fig. 6(b): requests ≤ 8 KB cost 8K tokens, larger ones
// their size in bytes).
type Appliance struct {
	Name   string `yaml:"name"`
	Server string `yaml:"server"`
	// Model presets the actual costs: kv, filestore, encryption, or custom
	// (Costs then required).
	Model string `yaml:"model"`
	// Parallelism is how many requests the appliance serves at once
	// (default 1): its capacity is Parallelism service-seconds per second.
	Parallelism float64       `yaml:"parallelism,omitempty"`
	Costs       []ServiceCost `yaml:"costs,omitempty"`
	VirtualCost []VirtualCost `yaml:"virtual_cost,omitempty"`
	// CapacityMin and CapacityMax bound a controller's capacity estimate
	// (tokens/s; 0: the controller's default).
	CapacityMin Tokens `yaml:"capacity_min,omitempty"`
	CapacityMax Tokens `yaml:"capacity_max,omitempty"`
}

// ServiceCost is the actual cost of one request type: Base + PerKB × size
// in KB (1 KB = 1000 bytes of payload).
type ServiceCost struct {
	Type  string   `yaml:"type"`
	Base  Duration `yaml:"base"`
	PerKB Duration `yaml:"per_kb,omitempty"`
}

// VirtualCost is an advertised cost function for one request type (all
// types when Type is empty): piecewise linear in the request size through
// Points (flat before the first point, extended with the last segment's
// slope after the last), the size first rounded up to a multiple of Step
// when Step is set (step functions, e.g. "integral multiples of 1 KB").
type VirtualCost struct {
	Type   string      `yaml:"type,omitempty"`
	Points []CostPoint `yaml:"points"`
	Step   Bytes       `yaml:"step,omitempty"`
}

// CostPoint is one point of a virtual cost function.
type CostPoint struct {
	Size   Bytes  `yaml:"size"`
	Tokens Tokens `yaml:"tokens"`
}

// VDC is a tenant's virtual datacenter beyond its VMs' hose guarantees
// (which are its virtual network links): guarantees on virtual appliances
// and the tenant's allocation policy (Pulsar §3, §4.1).
type VDC struct {
	// Fixed guarantees are also maxima: the tenant gets no spare capacity.
	Fixed      bool                 `yaml:"fixed,omitempty"`
	Appliances []ApplianceGuarantee `yaml:"appliances,omitempty"`
	// Policy is the tenant's local allocation among its flows: drf
	// (default), maxmin or firstfit; Weights overrides a flow's local
	// weight, keyed "src->dst" (dst a VM or an appliance).
	Policy  string             `yaml:"policy,omitempty"`
	Weights map[string]float64 `yaml:"weights,omitempty"`
	// GlobalWeight is the tenant's weight for spare capacity (default:
	// derived from its guarantees by the mechanism).
	GlobalWeight float64 `yaml:"global_weight,omitempty"`
}

// ApplianceGuarantee is a guarantee on a virtual appliance in tokens/s,
// with an optional maximum.
type ApplianceGuarantee struct {
	Appliance string `yaml:"appliance"`
	Guarantee Tokens `yaml:"guarantee"`
	Max       Tokens `yaml:"max,omitempty"`
}

// RequestType is one entry of a request mix. Request and Response are the
// bytes on the wire each way; by default reads (read, get) send a 64-byte
// request and receive Size, writes (write, put, cwrite) send Size and
// receive 64 bytes, and transforms (rc4, aes, compress) send and receive
// Size.
type RequestType struct {
	Type     string  `yaml:"type"`
	Size     Bytes   `yaml:"size"`
	Fraction float64 `yaml:"fraction"`
	Request  Bytes   `yaml:"request,omitempty"`
	Response Bytes   `yaml:"response,omitempty"`
}

// Tokens is an amount (or rate) of tokens, written 8000, "8K", "1.6M",
// "1600MT" or "1600MT/s" (powers of 1000).
type Tokens float64
