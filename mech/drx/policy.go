package drx

import "math"

// Policies (§V and §VI-B).
const (
	// PolicyEB is Equal-Blame (§V-A): every VME in the DCCR set gets the
	// same share of the blame, β_P = 1/N(DCCR).
	PolicyEB = "eb"
	// PolicyHB is Hurt-Based (§V-B): a VME's share is its part of the
	// DCCR set's I/O, β_P = IO_i / Σ IO_k.
	PolicyHB = "hb"
	// PolicyCC is CPU-cap-only (§VI-B, "CC"): no prices; every interfering
	// VM's cap drops by a fixed step (5 points) per violation, down to
	// the floor (25%).
	PolicyCC = "cc"
	// PolicyPC is proportional capping (§VI-B, "PC"): the step is
	// scaled by the VME's I/O ratio in the DCCR set.
	PolicyPC = "pc"
)

// Scopes (§VI-B: "Distributed" and "Local" sub-types of each policy).
const (
	// ScopeDist: the platform manager changes a VME's price for all its
	// VMs across the cluster.
	ScopeDist = "dist"
	// ScopeLocal: the price changes apply only at the host agent that
	// reports the congestion, to its own VMs.
	ScopeLocal = "local"
)

// Blame returns β_P for each VME of a DCCR set under policy (EB or HB):
// io[i] is the I/O of the set's i-th VME (HB; ignored by EB). Under HB a
// set that did no I/O at all is blamed equally.
func Blame(policy string, io []float64) []float64 {
	b := make([]float64, len(io))
	if len(io) == 0 {
		return b
	}
	sum := 0.0
	for _, x := range io {
		if x > 0 {
			sum += x
		}
	}
	for i, x := range io {
		switch {
		case (policy == PolicyHB || policy == PolicyPC) && sum > 0:
			b[i] = math.Max(x, 0) / sum
		default:
			b[i] = 1 / float64(len(io))
		}
	}
	return b
}

// NewPrice is the pricing function of §V: NP_i = OP_i + (PD_x · β_P,i ·
// α_i) · OP_i, PD_x the fractional performance degradation of the
// congested VME x.
func NewPrice(op, pd, beta, alpha float64) float64 {
	return op + pd*beta*alpha*op
}

// CapBeta is β_C of §V: EL_h / RL_i^j, the percentage of the epoch left on
// the host over the percentage of the VM's Resos left. A VM with no Resos
// left gets +Inf (its cap goes to the floor).
func CapBeta(epochLeft, resosLeft float64) float64 {
	if resosLeft <= 0 {
		return math.Inf(1)
	}
	return epochLeft / resosLeft
}

// NewCap is the cap function of §V: NC = OC − OC/100 · ((NP − OP)/OP ·
// 100 · β_C), in percent of the VM's full rate, kept within [floor, 100].
func NewCap(oc, op, np, betaC, floor float64) float64 {
	if !(op > 0) {
		return oc
	}
	rel := (np - op) / op
	if rel <= 0 {
		return clampCap(oc, floor)
	}
	nc := oc - oc/100*(rel*100*betaC)
	if math.IsNaN(nc) {
		nc = floor
	}
	return clampCap(nc, floor)
}

// StepCap is CC's and PC's cap function: the cap drops by step·share
// points (share 1 for CC, the VME's I/O ratio for PC), down to floor.
func StepCap(oc, step, share, floor float64) float64 {
	return clampCap(oc-step*share, floor)
}

func clampCap(c, floor float64) float64 {
	return math.Max(floor, math.Min(100, c))
}
