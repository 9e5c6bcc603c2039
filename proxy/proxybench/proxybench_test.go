package proxybench

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Redis 7.0's redis-benchmark --csv, as Debian bookworm's redis-tools
// prints it (against twemproxy, with its CONFIG warning merged in).
const sampleCSV = `WARNING: Could not fetch server CONFIG
"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","41666.67","0.021","0.016","0.023","0.031","0.055","2.007"
"GET","588235.25","0.970","0.120","0.631","4.239","5.007","5.735"
`

func TestParseCSV(t *testing.T) {
	got, err := ParseCSV([]byte(sampleCSV))
	if err != nil {
		t.Fatal(err)
	}
	want := []Measured{{"SET", 41666.67, 0.023, 0.055}, {"GET", 588235.25, 0.631, 5.007}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	for name, in := range map[string]string{
		"empty":       "",
		"no header":   `"SET","1","2"` + "\n",
		"header only": `"test","rps","p50_latency_ms","p99_latency_ms"` + "\n",
		"redis 6":     `"test","rps"` + "\n" + `"SET","1000.00"` + "\n",
		"bad number":  `"test","rps","p50_latency_ms","p99_latency_ms"` + "\n" + `"SET","x","1","2"` + "\n",
		"short line":  `"test","rps","p50_latency_ms","p99_latency_ms"` + "\n" + `"SET","1","2"` + "\n",
	} {
		if _, err := ParseCSV([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// /proc/PID/stat of a process whose name holds a space and a ')'.
	stat := "4242 (nut cr)acker) S 1 4242 4242 0 -1 4194560 300 0 0 0 123 77 0 0 20 0 1 0 100 1000 50 18446744073709551615"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * time.Second; got != want {
		t.Fatalf("got %v, want %v (200 ticks)", got, want)
	}
	if _, err := parseStatCPU("4242 (x) S 1 2"); err == nil {
		t.Fatal("short line: no error")
	}
	self, err := procCPU(os.Getpid())
	if err != nil || self < 0 {
		t.Fatalf("own /proc stat: %v, %v", self, err)
	}
}

func TestGoal(t *testing.T) {
	rows := []Row{
		{Target: Direct, Pipeline: 1, Clients: 1, Test: "GET", RPS: 40000, P99: 0.05},
		{Target: Twemproxy, Pipeline: 1, Clients: 1, Test: "GET", RPS: 20000, P99: 0.12},
		{Target: Bulkhead, Pipeline: 1, Clients: 1, Test: "GET", RPS: 25000, P99: 0.10},
		{Target: Direct, Pipeline: 16, Clients: 50, Test: "GET", RPS: 900000, P99: 1},
		{Target: Twemproxy, Pipeline: 16, Clients: 50, Test: "GET", RPS: 600000, P99: 2},
		{Target: Bulkhead, Pipeline: 16, Clients: 50, Test: "GET", RPS: 500000, P99: 3},
	}
	fillAdded(rows)
	if math.Abs(rows[2].AddedP99-0.05) > 1e-9 {
		t.Fatalf("added p99 %v, want 0.05 ms", rows[2].AddedP99)
	}
	if _, met := Goal(rows); met {
		t.Fatal("met with 500K < twemproxy's 600K")
	}
	rows[5].RPS = 700000
	if lines, met := Goal(rows); !met {
		t.Fatalf("not met: %v", lines)
	}
	noDirect := slices.DeleteFunc(slices.Clone(rows), func(r Row) bool { return r.Target == Direct })
	if lines, met := Goal(noDirect); met || len(lines) != 1 || !strings.Contains(lines[0], "direct not run") {
		t.Fatalf("without direct: %v, %v", lines, met)
	}
	rows[2].P99 = 0.2
	fillAdded(rows)
	if lines, met := Goal(rows); met || len(lines) != 1 || !strings.Contains(lines[0], "150 µs") {
		t.Fatalf("p99 added 150 µs: %v, %v", lines, met)
	}
}

// children returns the PIDs of this process's live children.
func children(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	me := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "PPid:" && f[1] == me {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestRunRealServers runs the whole bench with tiny counts against a real
// redis-server, nutcracker and the proxy (Debian: redis-server,
// redis-tools, nutcracker; the test fails without them), and checks that
// every server is gone afterwards.
func TestRunRealServers(t *testing.T) {
	if kids := children(t); len(kids) > 0 {
		t.Fatalf("children before the bench: %v", kids)
	}
	var progress bytes.Buffer
	opt := Options{Requests: 300, Clients: []int{1, 4}, Pipeline: []int{1, 4}, Rounds: 2,
		Targets: []string{Direct, Twemproxy, Bulkhead}, Progress: &progress}
	res, err := Run(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	if kids := children(t); len(kids) > 0 {
		t.Errorf("children left after the bench: %v", kids)
	}
	if want := 2 * 2 * 2 * 3 * 2; len(res.Rows) != want {
		t.Fatalf("%d rows, want %d", len(res.Rows), want)
	}
	for _, r := range res.Rows {
		if r.RPS <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Requests != 300*r.Pipeline || r.Round < 1 || r.Round > 2 {
			t.Errorf("implausible row %+v", r)
		}
		if (r.Test != "SET" && r.Test != "GET") || math.IsNaN(r.AddedP99) {
			t.Errorf("row %+v: test or added p99", r)
		}
		switch r.Target {
		case Direct:
			if r.CPU != 0 || !math.IsNaN(r.CPUPer100K) || !math.IsNaN(r.SyscallsPerRequest) {
				t.Errorf("direct row with a proxy CPU: %+v", r)
			}
		case Bulkhead:
			// Isolation on: the proxy's statistics saw every request
			// (plus redis-benchmark's CONFIG GETs).
			if r.Accounted < uint64(r.Requests) || r.CPU <= 0 || !(r.SyscallsPerRequest > 0) {
				t.Errorf("bulkhead row %+v: %d requests accounted of %d, CPU %v", r, r.Accounted, r.Requests, r.CPU)
			}
		}
	}
	if n := strings.Count(progress.String(), "\n"); n != 1+len(res.Rows) {
		t.Errorf("%d progress lines:\n%s", n, progress.String())
	}

	var md, out bytes.Buffer
	if err := WriteMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(md.String(), "\n| "); n != 2+len(res.Rows)/2 { // header, separator, a row per setting
		t.Errorf("markdown table with %d rows:\n%s", n, md.String())
	}
	if !strings.Contains(md.String(), "Goal (issue 14, item 5") {
		t.Errorf("no verdict:\n%s", md.String())
	}
	if err := WriteCSV(&out, res); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(res.Rows) || strings.Join(recs[0], ",") != strings.Join(CSVHeader, ",") {
		t.Fatalf("CSV:\n%v", recs)
	}
	t.Logf("\n%s", md.String())
}

// TestRunCancelled ends a bench mid-run: Run returns the context's error
// and leaves no server behind.
func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	progress := &syncWriter{}
	go func() {
		// Cancel during the first run, once the servers are up.
		for !strings.Contains(progress.String(), "redis-benchmark runs") && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond)
		cancel()
	}()
	_, err := Run(ctx, Options{Requests: 10_000_000, Clients: []int{1}, Pipeline: []int{1},
		Targets: []string{Twemproxy, Bulkhead}, Progress: progress})
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if kids := children(t); len(kids) > 0 {
		t.Errorf("children left after a cancelled bench: %v", kids)
	}
}

func TestSummary(t *testing.T) {
	var rows []Row
	for round, v := range [][2]float64{{100, 1}, {300, 3}, {200, 2}} {
		rows = append(rows,
			Row{Round: round + 1, Target: Direct, Pipeline: 1, Clients: 1, Test: "GET", RPS: 2 * v[0], P99: v[1] / 2,
				CPUPer100K: math.NaN(), SyscallsPerRequest: math.NaN(), RedisCPUPer100K: 1},
			Row{Round: round + 1, Target: Bulkhead, Pipeline: 1, Clients: 1, Test: "GET", RPS: v[0], P50: v[1] / 4, P99: v[1],
				CPUPer100K: v[1], SyscallsPerRequest: 6, Accounted: uint64(v[0]), RedisCPUPer100K: 1})
	}
	fillAdded(rows)
	if rows[1].AddedP99 != 0.5 {
		t.Fatalf("round 1's added p99 %v, want 0.5", rows[1].AddedP99)
	}
	s := Summary(rows)
	if len(s) != 2 {
		t.Fatalf("%d summary rows, want 2", len(s))
	}
	d, b := s[0], s[1]
	if d.Target != Direct || d.RPS != 400 || d.P99 != 1 || !math.IsNaN(d.CPUPer100K) {
		t.Errorf("direct's medians: %+v", d)
	}
	if b.RPS != 200 || b.P50 != 0.5 || b.P99 != 2 || b.AddedP99 != 1 || b.CPUPer100K != 2 || b.SyscallsPerRequest != 6 || b.Accounted != 200 || b.Round != 0 {
		t.Errorf("bulkhead's medians: %+v", b)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 1..4: %v", m)
	}
}

func TestOptionsChecked(t *testing.T) {
	for _, o := range []Options{
		{Requests: 0, Clients: []int{1}, Pipeline: []int{1}, Targets: []string{Direct}},
		{Requests: 1, Clients: []int{0}, Pipeline: []int{1}, Targets: []string{Direct}},
		{Requests: 1, Clients: []int{1}, Pipeline: []int{1}, Targets: []string{"envoy"}},
		{Requests: 1, Clients: []int{1}, Pipeline: []int{1}, Targets: []string{Direct, Direct}},
		{Requests: 1, Clients: []int{1}, Pipeline: nil, Targets: []string{Direct}},
		{Requests: 1, Clients: []int{1}, Pipeline: []int{1}, Targets: []string{Direct}, Rounds: -1},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// syncWriter is a buffer written and read by different goroutines.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
