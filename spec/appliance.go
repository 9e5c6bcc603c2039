package spec

import "github.com/bulkhead-dc/bulkhead/model"

// Appliances, their cost models and VDCs live in package model; these
// aliases and wrappers keep spec's names.
type (
	// Appliance is a shared appliance; it now lives in package model
	// (model.Appliance).
	Appliance = model.Appliance
	// ServiceCost is the actual cost of one request type; it now lives in
	// package model (model.ServiceCost).
	ServiceCost = model.ServiceCost
	// VirtualCost is an advertised cost function; it now lives in package
	// model (model.VirtualCost).
	VirtualCost = model.VirtualCost
	// CostPoint is one point of a virtual cost function; it now lives in
	// package model (model.CostPoint).
	CostPoint = model.CostPoint
	// VDC is a tenant's virtual datacenter; it now lives in package model
	// (model.VDC).
	VDC = model.VDC
	// ApplianceGuarantee is a guarantee on a virtual appliance; it now
	// lives in package model (model.ApplianceGuarantee).
	ApplianceGuarantee = model.ApplianceGuarantee
	// RequestType is one entry of a request mix; it now lives in package
	// model (model.RequestType).
	RequestType = model.RequestType
)

// Appliance models, VDC policies and request types; they now live in
// package model.
const (
	ModelKV         = model.ModelKV
	ModelFilestore  = model.ModelFilestore
	ModelEncryption = model.ModelEncryption
	ModelCustom     = model.ModelCustom

	PolicyDRF      = model.PolicyDRF
	PolicyMaxMin   = model.PolicyMaxMin
	PolicyFirstFit = model.PolicyFirstFit

	ReqGet      = model.ReqGet
	ReqPut      = model.ReqPut
	ReqRead     = model.ReqRead
	ReqWrite    = model.ReqWrite
	ReqCWrite   = model.ReqCWrite
	ReqRC4      = model.ReqRC4
	ReqAES      = model.ReqAES
	ReqCompress = model.ReqCompress

	HeaderBytes = model.HeaderBytes
)

// Models lists the known models (model.Models).
var Models = model.Models

// Policies lists the known local allocation policies (model.Policies).
var Policies = model.Policies

// ModelCosts is model.ModelCosts.
func ModelCosts(name string) ([]ServiceCost, bool) { return model.ModelCosts(name) }

// DefaultVirtualCost is model.DefaultVirtualCost.
func DefaultVirtualCost() VirtualCost { return model.DefaultVirtualCost() }

// LookupAppliance returns the named appliance.
func (s *Scenario) LookupAppliance(name string) (*Appliance, bool) {
	for i := range s.Appliances {
		if s.Appliances[i].Name == name {
			return &s.Appliances[i], true
		}
	}
	return nil, false
}

// Via is an appliance a request passes through on its way to its
// destination (Pulsar §6.1: traffic encrypted by an encryption appliance
// before it goes on the wire), served there as request type Type with the
// request's size. Its response comes back the same way.
type Via struct {
	Appliance string `yaml:"appliance"`
	Type      string `yaml:"type"`
}
