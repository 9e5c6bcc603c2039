package analysis_test

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/analysis"
)

const scenarios = "../scenarios"

// TestElasticSwitchFig2 makes Fig. 2's table under none and ElasticSwitch
// and checks it: a row per mechanism with a cell per UDP rate; ElasticSwitch
// gives TCP ≥ 95% of the ideal (1 Gbps − UDP, at least its 450 Mbps
// guarantee plus half the spare) whatever the UDP rate, while without
// protection TCP falls below its guarantee once UDP takes more than the
// rest.
func TestElasticSwitchFig2(t *testing.T) {
	var progress strings.Builder
	tables, err := analysis.ElasticSwitchTables(context.Background(), analysis.ElasticSwitchOptions{
		Scenarios: scenarios, Mechanisms: []string{"none", "elasticswitch"}, Tables: []string{"fig2"}, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 1 || tables[0].Name != "fig2" {
		t.Fatalf("got %d tables, want fig2 alone", len(tables))
	}
	tb := tables[0]
	t.Log("\n" + tb.Markdown())
	if got := strings.Count(progress.String(), "analyze elasticswitch ["); got != 2 {
		t.Errorf("%d progress lines for 2 runs:\n%s", got, progress.String())
	}
	if md := tb.Markdown(); strings.Count(md, "\n|") != 2+len(tb.Rows) {
		t.Errorf("Markdown has %d table lines, want header, separator and %d rows:\n%s", strings.Count(md, "\n|"), len(tb.Rows), md)
	}
	rates := analysis.ESUDPRates()
	tcp := map[string][]float64{}
	for _, row := range tb.Rows {
		if len(row) != len(tb.Header) {
			t.Fatalf("row %v: %d cells, header has %d", row, len(row), len(tb.Header))
		}
		for _, c := range row[1 : 1+len(rates)] {
			v, err := strconv.ParseFloat(c, 64)
			if err != nil {
				t.Fatalf("row %s: cell %q: %v", row[0], c, err)
			}
			tcp[row[0]] = append(tcp[row[0]], v)
		}
	}
	if len(tb.Rows) != 2 || len(tcp["none"]) == 0 || len(tcp["elasticswitch"]) == 0 {
		t.Fatalf("rows %v, want one for none and one for elasticswitch", tb.Rows)
	}
	for k, u := range rates {
		ideal := math.Max(1000-float64(u), 500)
		if es := tcp["elasticswitch"][k]; es < 0.95*ideal {
			t.Errorf("UDP at %d Mbps: TCP gets %.0f Mbps under elasticswitch, want ≥ 95%% of the ideal %.0f", u, es, ideal)
		}
		if none := tcp["none"][k]; u >= 600 && none >= 450 {
			t.Errorf("UDP at %d Mbps: TCP gets %.0f Mbps without protection, want below its 450 Mbps guarantee", u, none)
		}
	}
}

// TestElasticSwitchTablesErrors: bad options fail before anything runs,
// with errors that say what is wrong.
func TestElasticSwitchTablesErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		o    analysis.ElasticSwitchOptions
		want string
	}{
		{"no scenarios", analysis.ElasticSwitchOptions{Scenarios: "no-such-dir"}, "no-such-dir"},
		{"not a directory", analysis.ElasticSwitchOptions{Scenarios: "elasticswitch.go"}, "not a directory"},
		{"missing file", analysis.ElasticSwitchOptions{Scenarios: ".", Tables: []string{"fig2"}}, "elasticswitch-fig2.yaml"},
		{"unknown table", analysis.ElasticSwitchOptions{Scenarios: scenarios, Tables: []string{"fig3"}}, `unknown table "fig3"`},
		{"unknown mechanism", analysis.ElasticSwitchOptions{Scenarios: scenarios, Mechanisms: []string{"nope"}}, `unknown mechanism "nope"`},
		{"mechanism twice", analysis.ElasticSwitchOptions{Scenarios: scenarios, Mechanisms: []string{"none", "none"}}, "twice"},
		{"fig10 without elasticswitch", analysis.ElasticSwitchOptions{Scenarios: scenarios, Mechanisms: []string{"none"}, Tables: []string{"fig10"}}, "add elasticswitch"},
	} {
		_, err := analysis.ElasticSwitchTables(ctx, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one that mentions %q", c.name, err, c.want)
		}
	}
	if _, err := analysis.ElasticSwitchTables(ctx, analysis.ElasticSwitchOptions{Scenarios: "no-such-dir"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing scenarios directory: %v, want fs.ErrNotExist", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := analysis.ElasticSwitchTables(cancelled, analysis.ElasticSwitchOptions{Scenarios: scenarios, Tables: []string{"table2"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v, want context.Canceled", err)
	}
}

// TestSimulationEmptyWindow: a window with no sample reads as NaN (a table
// shows "—"), not as a rate of 0.
func TestSimulationEmptyWindow(t *testing.T) {
	r, err := analysis.Simulate(context.Background(), scenarios, "elasticswitch-table2.yaml", "none", analysis.SimulateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := analysis.Window{From: r.In.Duration, To: 2 * r.In.Duration}
	if v := r.Tenant(w, "A45"); !math.IsNaN(v) {
		t.Errorf("tenant over an empty window: %g, want NaN", v)
	}
	if v := r.Tenant(analysis.Window{To: r.In.Duration}, "A45"); !(v > 0) {
		t.Errorf("tenant A45 over the whole run: %g Mbps", v)
	}
}
