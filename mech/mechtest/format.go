package mechtest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/mech"
)

// num formats a number with 6 significant digits ("inf" for +Inf).
func num(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	return fmt.Sprintf("%.6g", x)
}

// rate formats a rate in bits/s as Mbps with 6 significant digits
// ("5Mbps", "0.1Mbps", "inf").
func rate(x float64) string {
	if math.IsInf(x, 1) {
		return "inf"
	}
	return num(x/1e6) + "Mbps"
}

func pairString(p mech.PairID) string { return p.Src + "->" + p.Dst }

func flowString(f mech.FlowID) string { return f.Src + "->" + f.Dst }

// kindNames name the limit kinds in outputs, in their sort order.
var kindNames = map[mech.LimitKind]string{
	mech.PairLimit: "pair",
	mech.VMEgress:  "vm-egress",
	mech.VMIngress: "vm-ingress",
}

func kindName(k mech.LimitKind) string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind%d", k)
}

func limitTarget(l mech.Limit) string {
	if l.Kind == mech.PairLimit {
		return pairString(l.Pair)
	}
	return l.VM
}

// sortedLimits returns the limits sorted by kind, then target (stable for
// repeated targets).
func sortedLimits(ls []mech.Limit) []mech.Limit {
	ls = slices.Clone(ls)
	slices.SortStableFunc(ls, func(a, b mech.Limit) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(limitTarget(a), limitTarget(b)))
	})
	return ls
}

func dirName(d mech.Direction) string {
	switch d {
	case mech.Egress:
		return "egress"
	case mech.Ingress:
		return "ingress"
	}
	return fmt.Sprintf("dir%d", d)
}

// weights formats a map of weights sorted by key: "a1=4.5e+08 b1=2e+08".
func weights[K cmp.Ordered](m map[K]float64) string {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%v=%s", k, num(m[k]))
	}
	return strings.Join(parts, " ")
}

// ints formats a map of integers sorted by key: "A=1 B=2".
func ints[K cmp.Ordered](m map[K]int) string {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%v=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// wireJSON encodes a message body as a host agent sends it.
func wireJSON(body any) ([]byte, error) {
	switch b := body.(type) {
	case json.RawMessage:
		return b, nil
	case []byte:
		return b, nil
	}
	return json.Marshal(body)
}

// canonicalJSON renders JSON with object keys sorted, no spaces, and
// numbers with 6 significant digits (so that the last bits of a float do
// not churn the golden files).
func canonicalJSON(data []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	if dec.More() {
		return "", fmt.Errorf("trailing data after JSON value")
	}
	var b strings.Builder
	if err := writeCanonical(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeCanonical(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		fmt.Fprint(b, x)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return err
		}
		b.WriteString(num(f))
	case string:
		s, _ := json.Marshal(x)
		b.Write(s)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			s, _ := json.Marshal(k)
			b.Write(s)
			b.WriteByte(':')
			if err := writeCanonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("unexpected JSON value %T", v)
	}
	return nil
}

// messageLine formats one message: "h1->h2 {json}".
func messageLine(m mech.Message) string {
	data, err := wireJSON(m.Body)
	if err != nil {
		return fmt.Sprintf("%s->%s <body does not encode to JSON: %v>", m.From, m.To, err)
	}
	s, err := canonicalJSON(data)
	if err != nil {
		return fmt.Sprintf("%s->%s <invalid JSON body %q: %v>", m.From, m.To, data, err)
	}
	return fmt.Sprintf("%s->%s %s", m.From, m.To, s)
}

// kindOf returns the "kind" field of a JSON message body, "?" if none.
func kindOf(data []byte) string {
	var k struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &k) != nil || k.Kind == "" {
		return "?"
	}
	return k.Kind
}

// writer accumulates an output, with sections and indentation.
type writer struct {
	b      strings.Builder
	indent string
}

func (w *writer) linef(format string, args ...any) {
	w.b.WriteString(w.indent)
	fmt.Fprintf(&w.b, format, args...)
	w.b.WriteByte('\n')
}

func (w *writer) String() string { return w.b.String() }

// formatActions writes an agent's actions: limits sorted by kind and
// target, schedulers by direction with sorted weights, messages in the
// order the agent returned them (From set to the agent's host).
func formatActions(w *writer, host string, act mech.Actions) {
	if len(act.Limits) > 0 {
		w.linef("limits:")
		for _, l := range sortedLimits(act.Limits) {
			w.linef("  %s %s %s", kindName(l.Kind), limitTarget(l), rate(l.Rate))
		}
	}
	if len(act.Schedulers) > 0 {
		w.linef("schedulers:")
		ss := slices.Clone(act.Schedulers)
		slices.SortStableFunc(ss, func(a, b mech.Scheduler) int { return cmp.Compare(a.Dir, b.Dir) })
		for _, s := range ss {
			if len(s.Weights) == 0 {
				w.linef("  %s rate=%s", dirName(s.Dir), rate(s.Rate))
				continue
			}
			w.linef("  %s rate=%s weights: %s", dirName(s.Dir), rate(s.Rate), weights(s.Weights))
		}
	}
	formatMessages(w, host, act.Messages)
	if len(act.Limits) == 0 && len(act.Schedulers) == 0 && len(act.Messages) == 0 {
		w.linef("no actions")
	}
}

func formatMessages(w *writer, from string, msgs []mech.Message) {
	if len(msgs) == 0 {
		return
	}
	w.linef("messages:")
	for _, m := range msgs {
		if m.From == "" {
			m.From = from
		}
		w.linef("  %s", messageLine(m))
	}
}

// formatControllerActions writes a controller's actions: allocations
// sorted by flow, each element labelled with its resource (paths gives the
// flows' paths; an element of unknown path is labelled by its index), the
// default rate, estimates, ports, DSCP code points and messages.
func formatControllerActions(w *writer, act mech.ControllerActions, paths map[mech.FlowID][]mech.PathElem, res []mech.ResourceInfo) {
	if len(act.Allocations) > 0 {
		w.linef("allocations:")
		as := slices.Clone(act.Allocations)
		slices.SortStableFunc(as, func(a, b mech.FlowAllocation) int {
			return cmp.Or(cmp.Compare(a.Flow.Src, b.Flow.Src), cmp.Compare(a.Flow.Dst, b.Flow.Dst))
		})
		for _, a := range as {
			w.linef("  %s %s", flowString(a.Flow), labelled(a.Rates, paths[a.Flow], res))
		}
	}
	w.linef("default-rate: %s", num(act.DefaultRate))
	if len(act.Estimates) > 0 {
		w.linef("estimates: %s", weights(act.Estimates))
	}
	if len(act.Ports) > 0 {
		w.linef("ports:")
		ps := slices.Clone(act.Ports)
		slices.SortStableFunc(ps, func(a, b mech.PortQueues) int { return cmp.Compare(a.Link, b.Link) })
		for _, p := range ps {
			name := fmt.Sprintf("#%d", p.Link)
			if p.Link >= 0 && p.Link < len(res) {
				name = res[p.Link].ID
			}
			ws := make([]string, len(p.Weights))
			for i, x := range p.Weights {
				ws[i] = num(x)
			}
			s := fmt.Sprintf("  %s weights=%s", name, strings.Join(ws, ","))
			if len(p.Tenants) > 0 {
				s += " tenants: " + ints(p.Tenants)
			}
			if len(p.DSCP) > 0 {
				s += " dscp: " + ints(p.DSCP)
			}
			w.linef("%s", s)
		}
	}
	if len(act.DSCP) > 0 {
		w.linef("dscp: %s", ints(act.DSCP))
	}
	formatMessages(w, mech.ControllerHost, act.Messages)
}

// durString formats a duration for headers ("15ms", "1.5s").
func durString(d time.Duration) string { return d.String() }
