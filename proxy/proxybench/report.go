package proxybench

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// sorted returns the rows by round, depth, clients, test (SET first, as run),
// then target in the order direct, twemproxy, bulkhead: each setting's
// targets side by side.
func sorted(rows []Row) []Row {
	rows = slices.Clone(rows)
	rank := func(t string) int { return slices.Index(knownTargets, t) }
	slices.SortStableFunc(rows, func(a, b Row) int {
		switch {
		case a.Round != b.Round:
			return a.Round - b.Round
		case a.Pipeline != b.Pipeline:
			return a.Pipeline - b.Pipeline
		case a.Clients != b.Clients:
			return a.Clients - b.Clients
		case a.Test != b.Test:
			if a.Test > b.Test { // SET before GET
				return -1
			}
			return 1
		}
		return rank(a.Target) - rank(b.Target)
	})
	return rows
}

func dash(v float64, format string) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// WriteMarkdown writes the rows' Summary (medians over the rounds) as a
// markdown table, then the goal's verdict.
func WriteMarkdown(w io.Writer, res *Result) error {
	fmt.Fprintf(w, "Proxy overhead: redis-benchmark against redis-server directly, through twemproxy and through Bulkhead's proxy (one flow, every bucket at %.0e tokens/s)\n", res.Allocation)
	fmt.Fprintf(w, "%s; median of %d rounds\n\n", res.Env, max(res.Rounds, 1))
	fmt.Fprintln(w, "| -P | -c | test | target | requests | requests/s | p50 ms | p99 ms | p99 added over direct | proxy CPU at 100K req/s | proxy syscalls per request |")
	fmt.Fprintln(w, "| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	sum := Summary(res.Rows)
	for _, r := range sorted(sum) {
		added := "–"
		if r.Target != Direct && !math.IsNaN(r.AddedP99) {
			added = fmt.Sprintf("%+.0f µs", 1000*r.AddedP99)
		}
		fmt.Fprintf(w, "| %d | %d | %s | %s | %d | %.0f | %.3f | %.3f | %s | %s | %s |\n",
			r.Pipeline, r.Clients, r.Test, r.Target, r.Requests, r.RPS, r.P50, r.P99, added,
			dash(100*r.CPUPer100K, "%.0f%% of a core"), dash(r.SyscallsPerRequest, "%.2f"))
	}
	lines, met := Goal(sum)
	fmt.Fprintln(w)
	if met {
		fmt.Fprintln(w, "Goal (issue 14, item 5) met: Bulkhead's throughput ≥ twemproxy's in every setting, p99 added < 100 µs unpipelined.")
	} else {
		fmt.Fprintln(w, "Goal (issue 14, item 5: throughput ≥ twemproxy's, p99 added < 100 µs unpipelined) not met:")
		for _, l := range lines {
			fmt.Fprintf(w, "  - %s\n", l)
		}
	}
	return nil
}

// CSVHeader is the header of WriteCSV's file.
var CSVHeader = []string{"round", "pipeline", "clients", "test", "target", "requests", "rps", "p50_ms", "p99_ms",
	"p99_added_ms", "proxy_cpu_s", "proxy_cores_per_100k_rps", "proxy_syscalls_per_request", "redis_cores_per_100k_rps", "accounted", "wall_s"}

// WriteCSV writes the rows, one per run and round (empty cells for what does not
// apply).
func WriteCSV(w io.Writer, res *Result) error {
	cw := csv.NewWriter(w)
	cw.Write(CSVHeader)
	num := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
	for _, r := range sorted(res.Rows) {
		cpu, acc := "", ""
		if r.Target != Direct {
			cpu = num(r.CPU.Seconds())
		}
		if r.Target == Bulkhead {
			acc = strconv.FormatUint(r.Accounted, 10)
		}
		added := num(r.AddedP99)
		if r.Target == Direct {
			added = ""
		}
		cw.Write([]string{strconv.Itoa(r.Round), strconv.Itoa(r.Pipeline), strconv.Itoa(r.Clients), r.Test, r.Target, strconv.Itoa(r.Requests),
			num(r.RPS), num(r.P50), num(r.P99), added, cpu, num(r.CPUPer100K), num(r.SyscallsPerRequest), num(r.RedisCPUPer100K), acc, num(r.Wall.Seconds())})
	}
	cw.Flush()
	return cw.Error()
}
