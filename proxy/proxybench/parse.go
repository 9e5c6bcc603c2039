package proxybench

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Measured is one test's line of redis-benchmark's --csv output.
type Measured struct {
	Test string  // as redis-benchmark names it: "SET", "GET"
	RPS  float64 // requests/s
	P50  float64 // ms
	P99  float64 // ms
}

// ParseCSV parses redis-benchmark's --csv output (Redis 7: a header
// "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
// "p95_latency_ms","p99_latency_ms","max_latency_ms", then one line per
// test). Columns are found by name; lines before the header (warnings) are
// skipped.
func ParseCSV(out []byte) ([]Measured, error) {
	// Warnings such as "WARNING: Could not fetch server CONFIG" may
	// precede the header when stderr is merged: start at the header.
	i := bytes.Index(out, []byte(`"test",`))
	if i < 0 {
		return nil, fmt.Errorf("redis-benchmark --csv: no header line in %q", clip(out))
	}
	r := csv.NewReader(bytes.NewReader(out[i:]))
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark --csv: header: %w", err)
	}
	col := map[string]int{}
	for j, h := range head {
		col[strings.TrimSpace(h)] = j
	}
	for _, name := range []string{"test", "rps", "p50_latency_ms", "p99_latency_ms"} {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("redis-benchmark --csv: no %q column in header %q (needs redis-benchmark 7 or later, Debian bookworm's redis-tools)", name, head)
		}
	}
	var ms []Measured
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("redis-benchmark --csv: %w", err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != len(head) {
			return nil, fmt.Errorf("redis-benchmark --csv: line %q has %d fields, the header %d", rec, len(rec), len(head))
		}
		m := Measured{Test: rec[col["test"]]}
		for name, dst := range map[string]*float64{"rps": &m.RPS, "p50_latency_ms": &m.P50, "p99_latency_ms": &m.P99} {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[col[name]]), 64)
			if err != nil {
				return nil, fmt.Errorf("redis-benchmark --csv: %s of %s: %w", name, m.Test, err)
			}
			*dst = v
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("redis-benchmark --csv: no result line in %q", clip(out))
	}
	return ms, nil
}

func clip(b []byte) string {
	if len(b) > 500 {
		return string(b[:500]) + "..."
	}
	return string(b)
}
