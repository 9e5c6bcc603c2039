package qshare

// Payment is one VM's part of its tenant's payment factor (§5.2,
// docs/qshare.md): a tenant's P = k·N·B is the sum over its VMs of price ·
// B, with B the VM's hose guarantee (in + out)/2 in Gbps (in and out are
// bits/s) and price the constant k per Gbps (Params.Price).
func Payment(price, in, out float64) float64 { return price * (in + out) / 2 / 1e9 }

// Score is a tenant's score, eq. (2): S = U·P, its usage factor (UFactor,
// at most u_cap) times its payment factor (Payment summed over its VMs).
// Alg. 2 (Binder.Bind) takes tenants in decreasing score.
func Score(u, payment float64) float64 { return u * payment }
