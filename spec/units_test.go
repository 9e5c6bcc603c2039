package spec_test

import (
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/spec"
	"gopkg.in/yaml.v3"
)

func TestParseRate(t *testing.T) {
	good := []struct {
		in   string
		want float64
	}{
		{"450Mbps", 450e6},
		{"1Gbps", 1e9},
		{"10Kbps", 10e3},
		{"1.5G", 1.5e9},
		{"100M", 100e6},
		{"2500", 2500},
		{"2500bps", 2500},
		{"0", 0},
		{"1gbps", 1e9},
		{"1GBPS", 1e9},
		{"450 Mbps", 450e6},
		{"2k", 2e3},
		{"1T", 1e12},
		{"3Tbps", 3e12},
		{"1e9", 1e9},
		{"2.5e3Mbps", 2.5e9},
		{"0.5Mbps", 0.5e6},
	}
	for _, c := range good {
		got, err := spec.ParseRate(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"", `invalid rate "": want a number with a unit such as "450Mbps" or "1Gbps"`},
		{"fast", `invalid rate "fast": want a number with a unit such as "450Mbps" or "1Gbps"`},
		{"-5Mbps", `invalid rate "-5Mbps": must not be negative`},
		{"1Gbs", `invalid rate "1Gbs": unknown unit "Gbs" (use bps, Kbps, Mbps, Gbps, Tbps)`},
		{"1MBs", `invalid rate "1MBs": unknown unit "MBs" (use bps, Kbps, Mbps, Gbps, Tbps)`},
		{"1.2.3M", `invalid rate "1.2.3M": want a number with a unit such as "450Mbps" or "1Gbps"`},
		{"NaN", `invalid rate "NaN": want a number with a unit such as "450Mbps" or "1Gbps"`},
		{"Inf", `invalid rate "Inf": want a number with a unit such as "450Mbps" or "1Gbps"`},
		{"1e999", `invalid rate "1e999": want a number with a unit such as "450Mbps" or "1Gbps"`},
		{"Mbps", `invalid rate "Mbps": want a number with a unit such as "450Mbps" or "1Gbps"`},
	}
	for _, c := range bad {
		_, err := spec.ParseRate(c.in)
		if err == nil || err.Error() != c.msg {
			t.Errorf("ParseRate(%q) error = %v; want %q", c.in, err, c.msg)
		}
	}
}

func TestParseBytes(t *testing.T) {
	good := []struct {
		in   string
		want float64
	}{
		{"1500", 1500},
		{"64KB", 64000},
		{"64KiB", 65536},
		{"1MB", 1e6},
		{"10MiB", 10 << 20},
		{"1GiB", 1 << 30},
		{"2GB", 2e9},
		{"1.5MB", 1.5e6},
		{"64kb", 64000},
		{"64kib", 65536},
		{"100B", 100},
		{"8K", 8000},
	}
	for _, c := range good {
		got, err := spec.ParseBytes(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"big", `invalid size "big": want a number of bytes with an optional unit such as "64KB" or "10MiB"`},
		{"-1KB", `invalid size "-1KB": must not be negative`},
		{"64Kbit", `invalid size "64Kbit": unknown unit "Kbit" (use B, KB, MB, GB, KiB, MiB, GiB)`},
	}
	for _, c := range bad {
		_, err := spec.ParseBytes(c.in)
		if err == nil || err.Error() != c.msg {
			t.Errorf("ParseBytes(%q) error = %v; want %q", c.in, err, c.msg)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"30s", 30 * time.Second},
		{"1ms", time.Millisecond},
		{"1m30s", 90 * time.Second},
		{"250us", 250 * time.Microsecond},
		{"0", 0},
	}
	for _, c := range good {
		got, err := spec.ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"30", `invalid duration "30": want a number with a unit such as "30s" or "1ms"`},
		{"soon", `invalid duration "soon": want a number with a unit such as "30s" or "1ms"`},
		{"-1s", `invalid duration "-1s": negative`},
	}
	for _, c := range bad {
		_, err := spec.ParseDuration(c.in)
		if err == nil || err.Error() != c.msg {
			t.Errorf("ParseDuration(%q) error = %v; want %q", c.in, err, c.msg)
		}
	}
}

func TestFormatRate(t *testing.T) {
	cases := []struct {
		in   float64
		want string
	}{
		{450e6, "450 Mbps"},
		{1.2e9, "1.2 Gbps"},
		{1e9, "1 Gbps"},
		{56.25e6, "56.25 Mbps"},
		{0, "0 bps"},
		{999, "999 bps"},
		{1500, "1.5 Kbps"},
		{2.5e12, "2.5 Tbps"},
		{1234.5678e6, "1.235 Gbps"},
	}
	for _, c := range cases {
		if got := spec.FormatRate(c.in); got != c.want {
			t.Errorf("FormatRate(%v) = %q; want %q", c.in, got, c.want)
		}
	}
}

// TestScalarYAML decodes the custom scalar types from YAML, good and bad,
// and writes them back.
func TestScalarYAML(t *testing.T) {
	type doc struct {
		R spec.Rate       `yaml:"r,omitempty"`
		B spec.Bytes      `yaml:"b,omitempty"`
		D spec.Duration   `yaml:"d,omitempty"`
		L spec.StringList `yaml:"l,omitempty"`
	}
	good := []struct {
		in   string
		want doc
		out  string
	}{
		{"r: 450Mbps", doc{R: 450e6}, "r: 450Mbps\n"},
		{"r: 1000000000", doc{R: 1e9}, "r: 1Gbps\n"},
		{"r: 1.5e3", doc{R: 1500}, "r: 1.5Kbps\n"},
		{"r: 1234", doc{R: 1234}, "r: 1.234Kbps\n"},
		{"r: 7", doc{R: 7}, "r: 7bps\n"},
		{"b: 1500", doc{B: 1500}, "b: 1.5KB\n"},
		{"b: 64KiB", doc{B: 65536}, "b: 64KiB\n"},
		{"b: 100", doc{B: 100}, "b: 100\n"},
		{"d: 30s", doc{D: spec.Duration(30 * time.Second)}, "d: 30s\n"},
		{"l: a1", doc{L: spec.StringList{"a1"}}, "l: a1\n"},
		{"l: [a1, a2]", doc{L: spec.StringList{"a1", "a2"}}, "l:\n    - a1\n    - a2\n"},
	}
	for _, c := range good {
		var d doc
		if err := yaml.Unmarshal([]byte(c.in), &d); err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if d.R != c.want.R || d.B != c.want.B || d.D != c.want.D || strings.Join(d.L, ",") != strings.Join(c.want.L, ",") {
			t.Errorf("%q: got %+v, want %+v", c.in, d, c.want)
		}
		out, err := yaml.Marshal(d)
		if err != nil || string(out) != c.out {
			t.Errorf("%q: marshal = %q, %v; want %q", c.in, out, err, c.out)
		}
	}
	bad := []struct{ in, msg string }{
		{"r: [1]", "yaml: unmarshal errors:\n  line 1: expected a rate, got a list"},
		{"r: 5 apples", `yaml: unmarshal errors:` + "\n" + `  line 1: invalid rate "5 apples": unknown unit "apples" (use bps, Kbps, Mbps, Gbps, Tbps)`},
		{"d: 5", "yaml: unmarshal errors:\n" + `  line 1: invalid duration "5": want a number with a unit such as "30s" or "1ms"`},
		{"l: {a: 1}", "yaml: unmarshal errors:\n  line 1: expected a name or a list of names, got a mapping"},
	}
	for _, c := range bad {
		var d doc
		err := yaml.Unmarshal([]byte(c.in), &d)
		if err == nil || err.Error() != c.msg {
			t.Errorf("%q: error %q; want %q", c.in, err, c.msg)
		}
	}
}
