package topview_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/topview"
)

func tenant(name string, vms int, guarantee, achieved float64, compliance *float64, below bool) api.Object {
	ts := &api.TenantSpec{}
	for range vms {
		ts.VMs = append(ts.VMs, api.VMSpec{})
	}
	return api.Object{Kind: api.KindTenant, Metadata: api.Meta{Name: name}, Spec: ts,
		Status: &api.TenantStatus{Guarantee: guarantee, Achieved: achieved, Compliance: compliance, Below: below}}
}

func host(name string, connected bool, last time.Time) api.Object {
	hs := &api.HostStatus{Connected: connected}
	if !last.IsZero() {
		hs.LastReport = &last
	}
	return api.Object{Kind: api.KindHost, Metadata: api.Meta{Name: name}, Spec: &api.HostSpec{}, Status: hs}
}

func ptr(f float64) *float64 { return &f }

// TestRender: tenants below their guarantee come first and are marked
// (in reverse video for a terminal), then the lowest compliance; the
// header counts them and the agents connected and silent; the sparkline
// grows frame by frame and forgets a deleted tenant.
func TestRender(t *testing.T) {
	now := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	v := topview.New()
	frame := func(tenants []api.Object, color bool) string {
		var b bytes.Buffer
		if err := v.Render(&b, topview.Frame{At: now, Tenants: tenants, Color: color,
			Hosts: []api.Object{host("s1", true, now.Add(-time.Second)), host("s2", true, now.Add(-time.Minute)), host("s3", false, time.Time{})}}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	tenants := []api.Object{
		tenant("web", 3, 900e6, 950e6, ptr(1), false),
		tenant("batch", 2, 600e6, 15e6, ptr(0.4), true),
		tenant("new", 1, 100e6, 0, nil, false),
		tenant("ok2", 1, 100e6, 99e6, ptr(0.9), false),
	}
	out := frame(tenants, false)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if !strings.Contains(lines[0], "tenants 4, below their guarantee 1") || !strings.Contains(lines[0], "agents 2 of 3 connected, 1 silent") {
		t.Errorf("header %q", lines[0])
	}
	order := []string{}
	for _, l := range lines[3:] {
		order = append(order, strings.Fields(strings.TrimPrefix(l, "!"))[0])
	}
	if want := "batch ok2 web new"; strings.Join(order, " ") != want {
		t.Errorf("order %v, want %s\n%s", order, want, out)
	}
	if !strings.HasPrefix(lines[3], "!") || strings.HasPrefix(lines[4], "!") {
		t.Errorf("the tenant below its guarantee is not the one marked:\n%s", out)
	}
	if !strings.Contains(lines[3], "15.0 Mbps") || !strings.Contains(lines[3], "40.0%") || !strings.Contains(lines[3], " 2 ") {
		t.Errorf("batch's row %q", lines[3])
	}
	if c := frame(tenants, true); !strings.Contains(c, "\x1b[7m!") {
		t.Errorf("with color the row below its guarantee is not in reverse video:\n%q", c)
	}
	// Two frames so far: web's sparkline has two points; after batch's
	// deletion and return, its history starts again.
	out = frame(tenants[:1], false)
	if !strings.Contains(out, "███") {
		t.Errorf("web at or above its guarantee for 3 frames: want a full sparkline of 3\n%s", out)
	}
	out = frame(tenants, false)
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "batch") && strings.Count(l, "▁") != 1 {
			t.Errorf("batch's history survived its deletion: %q", l)
		}
	}
}

func TestSparkline(t *testing.T) {
	for _, tc := range []struct {
		values    []float64
		guarantee float64
		want      string
	}{
		{[]float64{0, 50, 100}, 100, "▁▅█"},
		{[]float64{200}, 100, "█"},       // above the guarantee: the top
		{[]float64{100, 200}, 100, "▅█"}, // the scale follows the highest
		{[]float64{10, 10}, 0, "██"},     // no guarantee: the highest value
		{nil, 100, ""},
	} {
		if got := topview.Sparkline(tc.values, tc.guarantee); got != tc.want {
			t.Errorf("Sparkline(%v, %v) = %q, want %q", tc.values, tc.guarantee, got, tc.want)
		}
	}
}
