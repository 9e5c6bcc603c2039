package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/proxy/appliancetest"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/proxy/resp"
	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// kvPath is a flow's path to a key-value store: the request link, the
// appliance, the reply link.
var kvPath = []mech.PathElem{{Resource: 0, Role: mech.Forward}, {Resource: 2, Role: mech.Appliance}, {Resource: 1, Role: mech.Reverse}}

func kvFlow(src string) Flow {
	return Flow{ID: mech.FlowID{Src: src, Dst: "kv"}, Tenant: "t-" + src, Path: kvPath}
}

func newProxy(t testing.TB, cfg Config, apps ...Appliance) *Proxy {
	t.Helper()
	p, err := New(cfg, apps...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// replyReader reads whole replies from a connection.
type replyReader struct {
	rd  *resp.Reader
	buf []byte
}

func newReplyReader(t testing.TB, c net.Conn) *replyReader {
	rd, err := resp.NewReader(c, resp.Replies, 0, resp.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return &replyReader{rd: rd}
}

func (r *replyReader) next() (string, error) {
	r.buf = r.buf[:0]
	for {
		seg, err := r.rd.Next()
		if err != nil {
			return "", err
		}
		r.buf = append(r.buf, seg.Bytes...)
		if seg.End {
			return string(r.buf), nil
		}
	}
}

func dialT(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func write(t testing.TB, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

// TestRelayRedis relays pipelined and split requests to a real Redis and
// checks replies, their order and the statistics each element is charged.
func TestRelayRedis(t *testing.T) {
	app := Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(appliancetest.StartRedis(t))}
	clock := tokenbucket.NewFakeClock(t0) // stands still: statistics are exact
	p := newProxy(t, Config{Clock: clock}, app)
	c := dialT(t, listen(t, p, kvFlow("vm1")))
	rr := newReplyReader(t, c)

	set := encode("SET", "k", "hello")
	get := encode("GET", "k")
	// Pipelined, one request split in two writes, an inline command.
	write(t, c, set+get+get[:5])
	time.Sleep(20 * time.Millisecond)
	write(t, c, get[5:]+"PING\r\n"+encode("HELLO", "3")+encode("GET", "k"))
	var got []string
	for range 6 {
		r, err := rr.next()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(r, "%") {
			r = "HELLO"
		}
		got = append(got, r)
	}
	want := []string{"+OK\r\n", "$5\r\nhello\r\n", "$5\r\nhello\r\n", "+PONG\r\n", "HELLO", "$5\r\nhello\r\n"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replies %q, want %q", got, want)
	}
	clock.Advance(time.Second)
	obs := p.Collect()
	if len(obs.Flows) != 1 {
		t.Fatalf("flows %+v", obs.Flows)
	}
	fo := obs.Flows[0]
	reqBytes := float64(len(set) + 3*len(get) + len("PING\r\n") + len(encode("HELLO", "3")))
	if fo.Used[0] != reqBytes {
		t.Errorf("forward link used %v tokens/s, want the request bytes %v", fo.Used[0], reqBytes)
	}
	// Every request is at most 8 KB: Fig. 6(b) charges 8000 tokens each.
	if fo.Used[1] != 6*8000 {
		t.Errorf("appliance used %v, want 6 × 8000", fo.Used[1])
	}
	if fo.Used[2] < float64(len("+OK\r\n")+3*len("$5\r\nhello\r\n")+len("+PONG\r\n")) {
		t.Errorf("reverse link used %v, less than the replies' bytes", fo.Used[2])
	}
	for i := range fo.Path {
		if fo.Backlog[i] != 0 || fo.Queued[i] != 0 || fo.Outstanding[i] != 0 {
			t.Errorf("element %d: backlog %v queued %v outstanding %v after everything was answered (no clock movement)", i, fo.Backlog[i], fo.Queued[i], fo.Outstanding[i])
		}
	}
	if fo.Allocation != nil {
		t.Errorf("allocation %v on the default rate", fo.Allocation)
	}
	if a := obs.Appliances[0]; a.Completed != 6 || a.Throughput != 6*8000 {
		t.Errorf("appliance stats %+v, want 6 completed, 48000 tokens/s", a)
	}
}

// replyCounter counts the replies on a connection in the background.
func replyCounter(t testing.TB, c net.Conn, check func(i int, reply string) error) *atomic.Int64 {
	var n atomic.Int64
	rr := newReplyReader(t, c)
	go func() {
		for {
			r, err := rr.next()
			if err != nil {
				return
			}
			if check != nil {
				if err := check(int(n.Load()), r); err != nil {
					t.Error(err)
					return
				}
			}
			n.Add(1)
		}
	}()
	return &n
}

// waitFor waits until cond holds (real time: the appliance answers).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle checks that a count stays at want for a while.
func settle(t testing.TB, what string, n func() int64, want int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s = %d (now %d)", what, want, n()), func() bool { return n() >= want })
	time.Sleep(30 * time.Millisecond)
	if got := n(); got != want {
		t.Fatalf("%s = %d, want %d", what, got, want)
	}
}

// TestRateFakeClock: N requests of cost c at rate r take N·c/r of (fake)
// time beyond the bucket's initial depth, one released per c/r, in order;
// two connections of one flow share its buckets; another flow is not
// delayed by this one's backlog.
func TestRateFakeClock(t *testing.T) {
	app := Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(appliancetest.StartRedis(t))}
	clock := tokenbucket.NewFakeClock(t0)
	const (
		cost  = 8000.0                 // Fig. 6(b) for a small request
		rate  = 10 * cost              // tokens/s: 10 requests/s
		burst = 2                      // the bucket's depth in requests (Buckets option)
		n     = 12                     // requests per connection
		step  = 100 * time.Millisecond // cost / rate
	)
	p := newProxy(t, Config{Clock: clock, Buckets: []tokenbucket.Option{tokenbucket.WithBurst(burst * step)}}, app)
	fA, fB := kvFlow("vmA"), kvFlow("vmB")
	if err := p.SetAllocation(fA.ID, []float64{Unlimited, rate, math.Inf(1)}); err != nil {
		t.Fatal(err)
	}
	addrA, addrB := listen(t, p, fA), listen(t, p, fB)

	// Two connections of flow A, each pipelining n ECHOs whose replies
	// must come back in order.
	var counts []*atomic.Int64
	for conn := range 2 {
		c := dialT(t, addrA)
		var b strings.Builder
		for i := range n {
			b.WriteString(encode("ECHO", fmt.Sprintf("c%d-%d", conn, i)))
		}
		counts = append(counts, replyCounter(t, c, func(i int, r string) error {
			want := fmt.Sprintf("c%d-%d", conn, i)
			if !strings.Contains(r, want) {
				return fmt.Errorf("connection %d: reply %d is %q, want %q (order)", conn, i, r, want)
			}
			return nil
		}))
		write(t, c, b.String())
	}
	total := func() int64 { return counts[0].Load() + counts[1].Load() }
	// The full bucket lets burst requests through at once, for both
	// connections together.
	settle(t, "replies in the burst", total, burst)

	// Flow B, on the (unlimited) default rate, is not held back by A's
	// backlog: its request passes with the clock standing still.
	cB := dialT(t, addrB)
	nB := replyCounter(t, cB, nil)
	write(t, cB, encode("PING"))
	settle(t, "flow B's replies", func() int64 { return nB.Load() }, 1)

	obs := p.Collect()
	var a mech.FlowObs
	for _, fo := range obs.Flows {
		if fo.Flow == fA.ID {
			a = fo
		}
	}
	// Each connection has its head request queued at the buckets; the
	// rest wait unread in the client's socket (backpressure).
	if want := 2 * cost; a.Backlog[1] != want {
		t.Fatalf("flow A's backlog %v, want %v (one queued request per connection)", a.Backlog[1], want)
	}
	// Then one request per step: N·c/r.
	for k := int64(burst + 1); k <= 2*n; k++ {
		clock.BlockUntilTimers(1) // the release loop waits for the next refill
		clock.Advance(step)
		settle(t, fmt.Sprintf("replies at %v", time.Duration(k-burst)*step), total, k)
	}
	if d := counts[0].Load() - counts[1].Load(); d < -1 || d > 1 {
		t.Errorf("connections got %d and %d: the shared bucket served them unevenly (FIFO by arrival)", counts[0].Load(), counts[1].Load())
	}
	elapsed := time.Duration(2*n-burst) * step
	obs = p.Collect()
	for _, fo := range obs.Flows {
		if fo.Flow != fA.ID {
			continue
		}
		if want := float64(2*n-burst) * cost / elapsed.Seconds(); math.Abs(fo.Used[1]-want) > 1e-6*want {
			t.Errorf("flow A used %v tokens/s at the appliance, want %v", fo.Used[1], want)
		}
		if fo.Backlog[1] != 0 || fo.Queued[1] <= 0 {
			t.Errorf("backlog %v queued %v after the queue drained", fo.Backlog[1], fo.Queued[1])
		}
		if fo.Allocation[1] != rate {
			t.Errorf("allocation %v", fo.Allocation)
		}
	}
}

// TestBackpressure: a flow held at rate 0 stops reading its client, so the
// client's writes block (TCP pushes back) instead of the proxy buffering.
func TestBackpressure(t *testing.T) {
	app := Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(appliancetest.StartRedis(t))}
	clock := tokenbucket.NewFakeClock(t0)
	p := newProxy(t, Config{Clock: clock}, app)
	f := kvFlow("vm1")
	if err := p.SetAllocation(f.ID, []float64{Unlimited, 0, Unlimited}); err != nil {
		t.Fatal(err)
	}
	c := dialT(t, listen(t, p, f))
	value := strings.Repeat("x", 1<<20)
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	written := 0
	var err error
	for written < 256<<20 && err == nil {
		var n int
		n, err = io.WriteString(c, encode("SET", "k", value))
		written += n
	}
	if err == nil {
		t.Fatalf("wrote %d bytes to a flow at rate 0: nothing pushed back", written)
	}
	t.Logf("the client could write %d bytes before TCP pushed back", written)
	// Now let it through: every reply arrives.
	if err := p.SetAllocation(f.ID, []float64{Unlimited, Unlimited, Unlimited}); err != nil {
		t.Fatal(err)
	}
	if rates, _ := p.Rates(f.ID); rates[1] != Unlimited {
		t.Fatalf("rates %v after SetAllocation", rates)
	}
	// The new rate refills from the next boundary on.
	clock.BlockUntilTimers(1)
	clock.Advance(10 * time.Millisecond)
	rr := newReplyReader(t, c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range written / len(encode("SET", "k", value)) {
		if r, err := rr.next(); err != nil || r != "+OK\r\n" {
			t.Fatalf("reply %d after the allocation rose: %q %v", i, r, err)
		}
	}
}

// TestFramingErrorReply: a malformed request gets the replies to the
// requests before it, then an error that says where, then the close.
func TestFramingErrorReply(t *testing.T) {
	app := Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(appliancetest.StartRedis(t))}
	p := newProxy(t, Config{}, app)
	c := dialT(t, listen(t, p, kvFlow("vm1")))
	write(t, c, encode("PING")+encode("PING")+"*1\r\n:5\r\n")
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	want := "+PONG\r\n+PONG\r\n-ERR bulkhead proxy: resp requests: at byte 32: expected '$'"
	if !strings.HasPrefix(string(all), want) {
		t.Fatalf("got %q, want prefix %q", all, want)
	}
}

// TestBigValueBoundedMemory passes a 50 MB SET and its GET through the
// proxy: the value arrives whole and the proxy allocates a small multiple
// of its buffers, not the value.
func TestBigValueBoundedMemory(t *testing.T) {
	app := Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(appliancetest.StartRedis(t))}
	p := newProxy(t, Config{}, app)
	c := dialT(t, listen(t, p, kvFlow("vm1")))
	const size = 50 << 20
	var before, after runtimeMem
	before.read()
	// The value streams from a generator; the reply is counted, not kept.
	go func() {
		w := bufio.NewWriterSize(c, 64<<10)
		fmt.Fprintf(w, "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n", size)
		chunk := []byte(strings.Repeat("0123456789abcdef", 4096))
		for left := size; left > 0; left -= len(chunk) {
			w.Write(chunk[:min(left, len(chunk))])
		}
		w.WriteString("\r\n")
		w.WriteString(encode("GET", "big"))
		w.WriteString(encode("STRLEN", "big"))
		w.Flush()
	}()
	rd, _ := resp.NewReader(c, resp.Replies, 0, resp.Limits{})
	var replies []string
	var got int64
	var first []byte
	for len(replies) < 3 {
		seg, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if len(replies) == 1 {
			got += int64(len(seg.Bytes))
			if len(first) < 64 {
				first = append(first, seg.Bytes[:min(len(seg.Bytes), 64)]...)
			}
		}
		if seg.End {
			replies = append(replies, fmt.Sprintf("size %d", seg.Size))
		}
	}
	after.read()
	if replies[0] != "size 2" || replies[1] != fmt.Sprintf("size %d", size) || replies[2] != fmt.Sprintf("size %d", len(fmt.Sprint(size))) {
		t.Fatalf("replies %v", replies)
	}
	if !strings.HasPrefix(string(first), fmt.Sprintf("$%d\r\n0123456789abcdef", size)) {
		t.Fatalf("GET reply starts %q", first)
	}
	alloc := after.total - before.total
	t.Logf("100 MB through the proxy (50 MB each way): %d KiB allocated by the whole test process", alloc>>10)
	if alloc > 8<<20 {
		t.Fatalf("allocated %d bytes relaying a %d-byte value: not bounded", alloc, size)
	}
	obs := p.Collect()
	fo := obs.Flows[0]
	if fo.Used[1] <= 0 {
		t.Fatalf("no appliance tokens used")
	}
}

// TestConfigErrors checks New's and the allocation API's refusals.
func TestConfigErrors(t *testing.T) {
	dial := tcpDial("127.0.0.1:1")
	for _, tc := range []struct {
		name string
		cfg  Config
		apps []Appliance
	}{
		{"no name", Config{}, []Appliance{{Protocol: RESP, Dial: dial}}},
		{"no protocol", Config{}, []Appliance{{Name: "a", Dial: dial}}},
		{"no dial", Config{}, []Appliance{{Name: "a", Protocol: HTTP}}},
		{"twice", Config{}, []Appliance{{Name: "a", Protocol: HTTP, Dial: dial}, {Name: "a", Protocol: RESP, Dial: dial}}},
		{"small buffer", Config{BufferSize: 100}, nil},
		{"negative default", Config{DefaultRate: -1}, nil},
		{"negative connection bound", Config{MaxConnsPerFlow: -1}, nil},
		{"negative idle timeout", Config{IdleTimeout: -time.Second}, nil},
		{"bad bucket option", Config{Buckets: []tokenbucket.Option{tokenbucket.WithBurst(0)}}, nil},
	} {
		if _, err := New(tc.cfg, tc.apps...); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	p := newProxy(t, Config{}, Appliance{Name: "kv", Protocol: RESP, Dial: dial})
	if err := p.SetAllocation(mech.FlowID{Src: "a", Dst: "kv"}, []float64{math.NaN()}); err == nil {
		t.Error("NaN rate accepted")
	}
	if err := p.Serve(context.Background(), nopConn{}, Flow{ID: mech.FlowID{Src: "a", Dst: "nope"}, Path: kvPath}); err == nil {
		t.Error("unknown appliance accepted")
	}
	if err := p.Serve(context.Background(), nopConn{}, Flow{ID: mech.FlowID{Src: "a", Dst: "kv"}}); err == nil {
		t.Error("empty path accepted")
	}
	if err := p.Serve(context.Background(), nopConn{}, kvFlow("a")); err == nil || !strings.Contains(err.Error(), "dial") {
		t.Errorf("dial failure: %v", err)
	}
	// An allocation for a flow seen later is applied when it comes; one of
	// the wrong length for a known flow is refused.
	if err := p.SetAllocation(kvFlow("b").ID, []float64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	p.Serve(context.Background(), nopConn{}, kvFlow("b"))
	if r, ok := p.Rates(kvFlow("b").ID); !ok || fmt.Sprint(r) != "[1 2 3]" {
		t.Errorf("rates %v %v", r, ok)
	}
	if err := p.SetAllocation(kvFlow("b").ID, []float64{1, 2}); err == nil {
		t.Error("wrong length accepted")
	}
	if err := p.Serve(context.Background(), nopConn{}, Flow{ID: kvFlow("b").ID, Path: kvPath[:1]}); err == nil {
		t.Error("a second path for one flow accepted")
	}
	// Defaults: per source, then for all; 0 is unlimited.
	if err := p.Apply(mech.ControllerActions{DefaultRate: 5, DefaultBySrc: map[string]float64{"a": 7}}); err != nil {
		t.Fatal(err)
	}
	if r, _ := p.Rates(kvFlow("a").ID); fmt.Sprint(r) != "[7 7 7]" {
		t.Errorf("default by source: %v", r)
	}
	if r, _ := p.Rates(kvFlow("b").ID); fmt.Sprint(r) != "[1 2 3]" {
		t.Errorf("an allocated flow took the default: %v", r)
	}
	p.SetDefault(0, nil)
	if r, _ := p.Rates(kvFlow("a").ID); r[0] != Unlimited {
		t.Errorf("default 0: %v, want unlimited", r)
	}
}

// nopConn is a client connection that is closed.
type nopConn struct{ net.Conn }

func (nopConn) Close() error                { return nil }
func (nopConn) Read([]byte) (int, error)    { return 0, io.EOF }
func (nopConn) Write(b []byte) (int, error) { return 0, errors.New("closed") }
func (nopConn) RemoteAddr() net.Addr        { return &net.TCPAddr{} }
func (nopConn) SetDeadline(time.Time) error { return nil }

// TestModelCost charges like the simulator: the model's cost function by
// type, with aliases.
func TestModelCost(t *testing.T) {
	a := model.Appliance{Name: "kv", Model: model.ModelKV, VirtualCost: []model.VirtualCost{
		{Type: "put", Points: []model.CostPoint{{Size: 0, Tokens: 100}, {Size: 1000, Tokens: 1100}}},
	}}
	cost := ModelCost(a, map[string]string{"set": "put"})
	a.VirtualCost[0].Points[0].Tokens = 9 // the function holds its own copy
	for _, tc := range []struct {
		typ  string
		size float64
		want float64
	}{
		{"set", 500, 600}, {"put", 0, 100}, {"get", 100, 8000}, {"get", 20000, 20000},
	} {
		if got := cost(tc.typ, tc.size); got != tc.want {
			t.Errorf("cost(%s, %v) = %v, want %v", tc.typ, tc.size, got, tc.want)
		}
	}
}

// TestExpectedReply: a flow learns the reply of each request type, charges
// the next request of the type its expected reply at once (so what waits
// and what is outstanding count on the reverse links too), and settles
// each request at its actual cost: a reply smaller than expected is
// refunded, so the reverse link's use is the replies' exact bytes.
func TestExpectedReply(t *testing.T) {
	clock := tokenbucket.NewFakeClock(t0) // stands still: statistics are exact
	app := Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(appliancetest.StartRedis(t))}
	p := newProxy(t, Config{Clock: clock}, app)
	f := kvFlow("vm1")
	c := dialT(t, listen(t, p, f))
	rr := newReplyReader(t, c)
	big := strings.Repeat("v", 10000)
	var replies int
	for _, req := range []string{encode("SET", "big", big), encode("SET", "small", "s"), encode("GET", "big"), encode("GET", "small"), encode("GET", "big")} {
		write(t, c, req)
		r, err := rr.next()
		if err != nil {
			t.Fatal(err)
		}
		replies += len(r)
	}
	p.mu.Lock()
	fl := p.flows[f.ID]
	p.mu.Unlock()
	ex := fl.newExchange("get")
	// The expected GET reply after 10 KB, 1 B and 10 KB replies: a moving
	// average between them.
	if ex.respWire < 1000 || ex.respWire > 10020 {
		t.Errorf("expected GET reply %d bytes, want between the small and the big reply", ex.respWire)
	}
	if e := fl.newExchange("set"); e.respWire != int64(len("+OK\r\n")) {
		t.Errorf("expected SET reply %d bytes, want 5", e.respWire)
	}
	clock.Advance(time.Second)
	fo := p.Collect().Flows[0]
	if got := fo.Used[2]; got != float64(replies) {
		t.Errorf("reverse link used %v tokens, want the replies' %d bytes exactly (over-charges refunded)", got, replies)
	}
}
