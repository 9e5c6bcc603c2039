package units_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/units"
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
		got, err := units.ParseRate(c.in)
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
		_, err := units.ParseRate(c.in)
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
		got, err := units.ParseBytes(c.in)
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
		_, err := units.ParseBytes(c.in)
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
		got, err := units.ParseDuration(c.in)
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
		_, err := units.ParseDuration(c.in)
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
		if got := units.FormatRate(c.in); got != c.want {
			t.Errorf("FormatRate(%v) = %q; want %q", c.in, got, c.want)
		}
	}
}

// TestScalarYAML decodes the custom scalar types from YAML, good and bad,
// and writes them back.
func TestScalarYAML(t *testing.T) {
	type doc struct {
		R units.Rate     `yaml:"r,omitempty"`
		B units.Bytes    `yaml:"b,omitempty"`
		D units.Duration `yaml:"d,omitempty"`
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
		{"d: 30s", doc{D: units.Duration(30 * time.Second)}, "d: 30s\n"},
	}
	for _, c := range good {
		var d doc
		if err := yaml.Unmarshal([]byte(c.in), &d); err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if d.R != c.want.R || d.B != c.want.B || d.D != c.want.D {
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
	}
	for _, c := range bad {
		var d doc
		err := yaml.Unmarshal([]byte(c.in), &d)
		if err == nil || err.Error() != c.msg {
			t.Errorf("%q: error %q; want %q", c.in, err, c.msg)
		}
	}
}

func TestParseTokens(t *testing.T) {
	good := []struct {
		in   string
		want float64
	}{
		{"8000", 8000},
		{"8K", 8000},
		{"8k", 8000},
		{"1.6M", 1.6e6},
		{"1600MT", 1600e6},
		{"1600MT/s", 1600e6},
		{"1600mt/s", 1600e6},
		{"1600 MT/s", 1600e6},
		{"5GT/s", 5e9},
		{"5gt", 5e9},
		{"2KT/s", 2000},
		{"7T/s", 7},
		{"1T", 1e12},
		{"1TT/s", 1e12},
		{"0", 0},
		{"1e6", 1e6},
		{"2.5e3M", 2.5e9},
	}
	for _, c := range good {
		got, err := units.ParseTokens(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseTokens(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"", `invalid tokens "": want a number with an optional unit such as "8K", "1.6M" or "1600MT/s"`},
		{"lots", `invalid tokens "lots": want a number with an optional unit such as "8K", "1.6M" or "1600MT/s"`},
		{"MT/s", `invalid tokens "MT/s": want a number with an optional unit such as "8K", "1.6M" or "1600MT/s"`},
		{"-8K", `invalid tokens "-8K": must not be negative`},
		{"NaN", `invalid tokens "NaN": want a number with an optional unit such as "8K", "1.6M" or "1600MT/s"`},
		{"1Mbps", `invalid tokens "1Mbps": unknown unit "Mbps" (use K, M, G or T, optionally followed by T or T/s: "8K", "1600MT/s")`},
		{"8KB", `invalid tokens "8KB": unknown unit "KB" (use K, M, G or T, optionally followed by T or T/s: "8K", "1600MT/s")`},
		{"1600MT/h", `invalid tokens "1600MT/h": unknown unit "MT/h" (use K, M, G or T, optionally followed by T or T/s: "8K", "1600MT/s")`},
		{"5XT/s", `invalid tokens "5XT/s": unknown unit "XT/s" (use K, M, G or T, optionally followed by T or T/s: "8K", "1600MT/s")`},
	}
	for _, c := range bad {
		_, err := units.ParseTokens(c.in)
		if err == nil || err.Error() != c.msg {
			t.Errorf("ParseTokens(%q) error = %v; want %q", c.in, err, c.msg)
		}
	}
}

func TestTokensYAML(t *testing.T) {
	type doc struct {
		T units.Tokens `yaml:"t"`
	}
	good := []struct {
		in   string
		want units.Tokens
		out  string
	}{
		{"t: 8000", 8000, "t: 8K\n"},
		{"t: 8K", 8000, "t: 8K\n"},
		{"t: 1600MT/s", 1.6e9, "t: 1.6G\n"},
		{"t: 6840MT/s", 6.84e9, "t: 6.84G\n"},
		{"t: 1234.5", 1234.5, "t: 1.2345K\n"},
		{"t: 12", 12, "t: 12\n"},
		{"t: 0.5", 0.5, "t: 0.5\n"},
	}
	for _, c := range good {
		var d doc
		if err := yaml.Unmarshal([]byte(c.in), &d); err != nil || d.T != c.want {
			t.Errorf("%q: got %v, %v; want %v", c.in, d.T, err, c.want)
			continue
		}
		out, err := yaml.Marshal(d)
		if err != nil || string(out) != c.out {
			t.Errorf("%q: marshal = %q, %v; want %q", c.in, out, err, c.out)
		}
		var back doc
		if err := yaml.Unmarshal(out, &back); err != nil || back.T != c.want {
			t.Errorf("%q: round trip %v, %v", c.in, back.T, err)
		}
	}
	bad := []struct{ in, msg string }{
		{"t: [1]", "yaml: unmarshal errors:\n  line 1: expected a number of tokens, got a list"},
		{"t: -5", "yaml: unmarshal errors:\n" + `  line 1: invalid tokens "-5": must not be negative`},
		{"t: 5 apples", "yaml: unmarshal errors:\n" + `  line 1: invalid tokens "5 apples": unknown unit "apples" (use K, M, G or T, optionally followed by T or T/s: "8K", "1600MT/s")`},
	}
	for _, c := range bad {
		var d doc
		err := yaml.Unmarshal([]byte(c.in), &d)
		if err == nil || err.Error() != c.msg {
			t.Errorf("%q: error %q; want %q", c.in, err, c.msg)
		}
	}
	for _, c := range []struct {
		v    float64
		want string
	}{{5000, "5000"}, {2.5, "2.5"}, {1.6e9, "1600M"}, {6.8405e9, "6840.5M"}, {1e6, "1M"}} {
		if got := units.Tokens(c.v).String(); got != c.want {
			t.Errorf("Tokens(%v).String() = %q; want %q", c.v, got, c.want)
		}
	}
}

// TestJSON decodes the quantities from JSON strings (as YAML writes them)
// and numbers (the base unit), writes them back as numbers, and reports
// bad values.
func TestJSON(t *testing.T) {
	type doc struct {
		R units.Rate     `json:"r,omitempty"`
		B units.Bytes    `json:"b,omitempty"`
		T units.Tokens   `json:"t,omitempty"`
		D units.Duration `json:"d,omitempty"`
	}
	good := []struct {
		in   string
		want doc
		out  string
	}{
		{`{"r": "450Mbps"}`, doc{R: 450e6}, `{"r":450000000}`},
		{`{"r": 2500}`, doc{R: 2500}, `{"r":2500}`},
		{`{"r": 1.5e9}`, doc{R: 1.5e9}, `{"r":1500000000}`},
		{`{"r": "2500"}`, doc{R: 2500}, `{"r":2500}`},
		{`{"r": 1e21}`, doc{R: 1e21}, `{"r":1e+21}`},
		{`{"b": "64KiB"}`, doc{B: 65536}, `{"b":65536}`},
		{`{"b": 0.5}`, doc{B: 0.5}, `{"b":0.5}`},
		{`{"t": "1600MT/s"}`, doc{T: 1.6e9}, `{"t":1600000000}`},
		{`{"t": 8000}`, doc{T: 8000}, `{"t":8000}`},
		{`{"d": "30s"}`, doc{D: units.Duration(30 * time.Second)}, `{"d":30000000000}`},
		{`{"d": 1000}`, doc{D: 1000}, `{"d":1000}`},
		{`{"d": 1e9}`, doc{D: units.Duration(time.Second)}, `{"d":1000000000}`},
		{`{"r": null, "b": null, "t": null, "d": null}`, doc{}, `{}`},
	}
	for _, c := range good {
		var d doc
		if err := json.Unmarshal([]byte(c.in), &d); err != nil || d != c.want {
			t.Errorf("%s: got %+v, %v; want %+v", c.in, d, err, c.want)
			continue
		}
		out, err := json.Marshal(d)
		if err != nil || string(out) != c.out {
			t.Errorf("%s: marshal = %s, %v; want %s", c.in, out, err, c.out)
		}
		// As encoding/json writes the underlying numbers.
		plain, _ := json.Marshal(map[string]any{"r": float64(d.R), "b": float64(d.B), "t": float64(d.T), "d": int64(d.D)})
		var back doc
		if err := json.Unmarshal(plain, &back); err != nil || back != d {
			t.Errorf("%s: from %s: %+v, %v", c.in, plain, back, err)
		}
	}
	bad := []struct{ in, msg string }{
		{`{"r": "1Gbs"}`, `invalid rate "1Gbs": unknown unit "Gbs" (use bps, Kbps, Mbps, Gbps, Tbps)`},
		{`{"r": -5}`, `invalid rate "-5": must not be negative`},
		{`{"r": true}`, `invalid rate "true": want a number with a unit such as "450Mbps" or "1Gbps"`},
		{`{"b": "64Kbit"}`, `invalid size "64Kbit": unknown unit "Kbit" (use B, KB, MB, GB, KiB, MiB, GiB)`},
		{`{"t": "5Mbps"}`, `invalid tokens "5Mbps": unknown unit "Mbps" (use K, M, G or T, optionally followed by T or T/s: "8K", "1600MT/s")`},
		{`{"d": "30"}`, `invalid duration "30": want a number with a unit such as "30s" or "1ms"`},
		{`{"d": -1}`, `invalid duration -1: negative`},
		{`{"d": -1e3}`, `invalid duration -1e3: negative`},
		{`{"d": 1.5}`, `invalid duration 1.5: want a whole number of nanoseconds or a string such as "30s" or "1ms"`},
		{`{"d": 1e19}`, `invalid duration 1e19: want a whole number of nanoseconds or a string such as "30s" or "1ms"`},
		{`{"d": [1]}`, `invalid duration [1]: want a whole number of nanoseconds or a string such as "30s" or "1ms"`},
	}
	for _, c := range bad {
		var d doc
		err := json.Unmarshal([]byte(c.in), &d)
		if err == nil || err.Error() != c.msg {
			t.Errorf("%s: error %v; want %q", c.in, err, c.msg)
		}
	}
}
