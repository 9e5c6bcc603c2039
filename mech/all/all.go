// Package all is the registry of mechanisms: it maps the names used in
// scenarios and on the command line to constructors that check parameters.
package all

import (
	"fmt"
	"sort"
	"strings"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/drx"
	"github.com/bulkhead-dc/bulkhead/mech/elasticswitch"
	"github.com/bulkhead-dc/bulkhead/mech/gatekeeper"
	"github.com/bulkhead-dc/bulkhead/mech/hosefill"
	"github.com/bulkhead-dc/bulkhead/mech/none"
	"github.com/bulkhead-dc/bulkhead/mech/pulsar"
	"github.com/bulkhead-dc/bulkhead/mech/qshare"
	"github.com/bulkhead-dc/bulkhead/mech/seawall"
	"github.com/bulkhead-dc/bulkhead/mech/static"
)

// constructor builds a mechanism from its scenario parameters.
type constructor func(params map[string]any) (mech.Mechanism, error)

func registry() map[string]constructor {
	r := map[string]constructor{
		none.Name:             noParams(func() mech.Mechanism { return none.New() }),
		static.Name:           noParams(func() mech.Mechanism { return static.New() }),
		seawall.Name:          wrap(seawall.New),
		elasticswitch.Name:    wrap(elasticswitch.New),
		gatekeeper.Name:       wrap(gatekeeper.New),
		pulsar.Name:           wrap(pulsar.New),
		pulsar.NameAppliances: wrap(pulsar.NewAppliances),
		pulsar.NameNetwork:    wrap(pulsar.NewNetwork),
		drx.Name:              wrap(drx.New),
		qshare.Name:           wrap(qshare.New),
		hosefill.Name:         wrap(hosefill.New),
	}
	for _, p := range []string{drx.PolicyEB, drx.PolicyHB, drx.PolicyCC, drx.PolicyPC} {
		for _, s := range []string{drx.ScopeLocal, drx.ScopeDist} {
			r[drx.VariantName(p, s)] = wrap(drx.NewVariant(p, s))
		}
	}
	return r
}

// wrap adapts a package's New to a constructor (a nil *M must not become
// a non-nil interface).
func wrap[M mech.Mechanism](f func(map[string]any) (M, error)) constructor {
	return func(params map[string]any) (mech.Mechanism, error) {
		m, err := f(params)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
}

func noParams(f func() mech.Mechanism) constructor {
	return func(params map[string]any) (mech.Mechanism, error) {
		if len(params) > 0 {
			keys := make([]string, 0, len(params))
			for k := range params {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return nil, fmt.Errorf("mechanism.params.%s: unknown parameter (this mechanism takes none)", keys[0])
		}
		return f(), nil
	}
}

// Names lists the registered mechanisms.
func Names() []string {
	var n []string
	for k := range registry() {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// New builds the named mechanism with its parameters.
func New(name string, params map[string]any) (mech.Mechanism, error) {
	c, ok := registry()[name]
	if !ok {
		return nil, fmt.Errorf("mechanism.name: unknown mechanism %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return c(params)
}
