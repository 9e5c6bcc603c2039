package testbed

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bulkhead-dc/bulkhead/loadgen"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/spec"
)

// redis-benchmark as the request client (RunOptions.RequestClient
// RequestRedisBenchmark): an outside client, for comparing the built-in
// generator with Redis's own tool. It runs closed-loop workloads on kv
// appliances only (redis-benchmark has no arrival rate). For every source
// VM and mix entry, during each phase, one redis-benchmark process in the
// VM's namespace with round(outstanding × fraction) clients (at least
// one), each with one request in flight (-P 1): a get is "GET
// bulkhead:get:SIZE" (the key loadgen's Prepare stores), a put "SET
// bulkhead:put:FLOW:__rand_int__ VALUE" over 1000 keys (-r), VALUE SIZE
// bytes of text given on its standard input (-x; redis-benchmark's -x
// stops at a NUL byte). The mix is kept by clients, not by drawing each
// request's type: with gets and puts that cost alike, the same thing.
// Completions are read from its progress lines (every 250 ms: "rps=R
// (overall: O)"): the requests completed so far are O × the time since
// the process started, so samples of 100 ms see them in 250 ms steps.

// benchFlow runs one request flow with redis-benchmark.
type benchFlow struct {
	tb   *Testbed
	vm   *VMPlan
	app  *AppliancePlan
	ops  []loadgen.Op
	conc []int // clients per op
	name string
	bin  string
}

func newBenchFlow(tb *Testbed, rq RequestPlan, ap *AppliancePlan, w *spec.Workload, ops []loadgen.Op) (*benchFlow, error) {
	if ap.Protocol != model.ProtoRedis || w.Outstanding <= 0 {
		return nil, fmt.Errorf("testbed: workload %q: redis-benchmark runs closed-loop workloads on kv appliances only (use the builtin request client)", w.Name)
	}
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return nil, fmt.Errorf("testbed: redis-benchmark not found (apt-get install -y redis-tools): %w", err)
	}
	v, _ := tb.plan.VM(rq.Src)
	b := &benchFlow{tb: tb, vm: v, app: ap, ops: ops, name: rq.Tenant + "/" + rq.Src + "->" + rq.Appliance, bin: bin}
	for _, op := range ops {
		b.conc = append(b.conc, max(1, int(math.Round(float64(w.Outstanding)*op.Fraction))))
	}
	return b, nil
}

var benchProgress = regexp.MustCompile(`rps=[0-9.]+ \(overall: ([0-9.]+)\)`)

// run runs the flow's processes until ctx ends, adding their completions
// to f's counters.
func (b *benchFlow) run(ctx context.Context, f *loadgen.Flow) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(b.ops))
	key := regexp.MustCompile(`[^A-Za-z0-9_.-]`).ReplaceAllString(b.name, "_")
	for i, op := range b.ops {
		args := []string{"-h", b.app.Addr.String(), "-p", strconv.Itoa(b.app.Port), "-c", strconv.Itoa(b.conc[i]),
			"-n", "2000000000", "-P", "1"}
		var stdin []byte
		if op.Read {
			args = append(args, "GET", "bulkhead:get:"+strconv.Itoa(op.Size))
		} else {
			args = append(args, "-r", "1000", "-x", "SET", "bulkhead:put:"+key+":__rand_int__")
			line := []byte("bulkhead redis-benchmark value 0123456789\n")
			stdin = bytes.Repeat(line, op.Size/len(line)+1)[:op.Size]
		}
		cmd := b.tb.Command(ctx, b.bin, args...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := b.tb.Start(b.vm.Name, cmd); err != nil {
			return fmt.Errorf("redis-benchmark: %w", err)
		}
		start := time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			var counted int64
			sc := bufio.NewScanner(out)
			sc.Split(splitCR)
			for sc.Scan() {
				m := benchProgress.FindSubmatch(sc.Bytes())
				if m == nil {
					continue
				}
				overall, _ := strconv.ParseFloat(string(m[1]), 64)
				if n := int64(overall * time.Since(start).Seconds()); n > counted {
					f.Add(i, n-counted)
					counted = n
				}
			}
			err := cmd.Wait()
			if ctx.Err() == nil {
				errs <- fmt.Errorf("redis-benchmark %s exited early: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// splitCR splits redis-benchmark's output at carriage returns and
// newlines (its progress lines end in '\r').
func splitCR(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
