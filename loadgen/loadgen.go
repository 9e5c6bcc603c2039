// Package loadgen is a request generator for real appliances: it sends a
// scenario's request mix (spec workloads of kind requests) to a Redis
// server (a key-value store, model.ProtoRedis) or an HTTP/1.1 file store
// with WebDAV PUT (nginx, model.ProtoHTTP), closed loop or open loop, and
// counts the requests completed by type, from which a caller derives
// requests/s and tokens/s (each request charged the appliance's virtual
// cost of its type and size, model.Appliance.Tokens, as the simulator
// charges it).
//
// # Requests on the wire
//
// A mix entry's type decides the protocol operation (Ops):
//
//	protocol  type     operation
//	redis     get      GET of a key holding size bytes (written by Prepare)
//	redis     put      SET of size bytes to a key of the connection's own
//	http      read     GET of a file of size bytes (written by Prepare)
//	http      write    PUT of size incompressible (pseudo-random) bytes to a file of the connection's own
//	http      cwrite   PUT of size compressible bytes (a repeated text line) to a file of the connection's own
//
// Other types (rc4, aes, compress, custom ones) have no real server and
// are refused. A write goes to a key or file of its own connection, which
// it overwrites: the store does not grow with the run. Keys are
// "bulkhead:get:SIZE" and "bulkhead:put:FLOW:CONN", files
// "/bulkhead/read-SIZE" and "/bulkhead/FLOW/CONN" (FLOW: the flow's name
// with anything but letters, digits, '-', '_' and '.' replaced by '_').
// The bytes on the wire are the protocol's (a GET's request is its
// command line or request head, its reply the value or body with its
// framing); a mix entry's request and response sizes, which the simulator
// charges on links, are not used.
//
// # Arrivals
//
// Closed loop (Config.Outstanding = N): N connections, each with one
// request in flight, sending the next as soon as the reply has arrived; a
// request's type is drawn from the mix by fraction. One connection per
// outstanding request, not N pipelined on fewer: Redis and nginx serve
// their connections in turn (a read of at most 16 KB of requests, a write
// of at most 64 KB of replies per connection per round of Redis's event
// loop), so N requests pipelined on one connection would get one
// connection's share of the server, where the simulator's FIFO appliance
// shares by outstanding requests. The workload's `connections`, the weight
// of a request flow in the simulator's network, is not used: on real
// traffic the flow's N connections compete in the network as themselves.
//
// Open loop (Config.Rate = λ): requests arrive as a Poisson process of
// rate λ (exponential gaps, as the simulator's flows arrive), their types
// drawn from the mix at arrival, and wait in the flow's backlog (FIFO, at
// most MaxBacklog requests; arrivals beyond it are dropped and counted)
// for one of the flow's Config.Connections connections (at least
// DefaultPool), each with one request in flight. What is still waiting
// when the phase ends is discarded.
//
// Random streams are seeded from Config.Seed and the phase: runs with the
// same seed draw the same types in the same order on every connection.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
)

// DefaultPool is the least number of connections of an open-loop flow.
const DefaultPool = 8

// MaxBacklog is the most requests an open-loop flow keeps waiting for a
// connection; arrivals beyond it are dropped (Flow.Dropped).
const MaxBacklog = 1 << 16

// DefaultTimeout bounds one request (sending it and reading its reply).
const DefaultTimeout = 10 * time.Second

// maxConsecutiveErrors is how many failed requests in a row end a flow
// with an error (a server that is gone, not one that refused a request).
const maxConsecutiveErrors = 50

// Op is one entry of a flow's mix, resolved to a protocol operation.
type Op struct {
	Type     string  // the model's request type
	Size     int     // payload bytes
	Fraction float64 // share of the flow's requests
	// Tokens is the request's virtual cost at the appliance
	// (model.Appliance.Tokens of its type and size).
	Tokens float64
	// Read: a GET of a stored object; otherwise a write (SET or PUT).
	Read bool
	// Compressible: a write of compressible bytes (cwrite).
	Compressible bool
}

// Ops resolves a mix against a real appliance that speaks protocol (see
// the package documentation for the mapping); it fails for a type the
// protocol has no operation for, or a size that is not positive.
func Ops(a *model.Appliance, protocol string, mix []model.RequestType) ([]Op, error) {
	if len(mix) == 0 {
		return nil, errors.New("loadgen: empty mix")
	}
	out := make([]Op, 0, len(mix))
	for i, m := range mix {
		op := Op{Type: m.Type, Size: int(m.Size), Fraction: m.Fraction, Tokens: a.Tokens(m.Type, float64(m.Size))}
		if len(mix) == 1 && op.Fraction == 0 {
			op.Fraction = 1
		}
		if op.Size <= 0 || op.Size > 512<<20 {
			return nil, fmt.Errorf("loadgen: appliance %s: mix[%d]: size %d bytes: want 1 byte to 512 MiB", a.Name, i, op.Size)
		}
		switch {
		case protocol == model.ProtoRedis && m.Type == model.ReqGet:
			op.Read = true
		case protocol == model.ProtoRedis && m.Type == model.ReqPut:
		case protocol == model.ProtoHTTP && m.Type == model.ReqRead:
			op.Read = true
		case protocol == model.ProtoHTTP && m.Type == model.ReqWrite:
		case protocol == model.ProtoHTTP && m.Type == model.ReqCWrite:
			op.Compressible = true
		case protocol == model.ProtoRedis:
			return nil, fmt.Errorf("loadgen: appliance %s: mix[%d]: type %q has no Redis operation (get: GET, put: SET)", a.Name, i, m.Type)
		case protocol == model.ProtoHTTP:
			return nil, fmt.Errorf("loadgen: appliance %s: mix[%d]: type %q has no HTTP file-store operation (read: GET, write and cwrite: PUT)", a.Name, i, m.Type)
		default:
			return nil, fmt.Errorf("loadgen: appliance %s: protocol %q: want %s or %s", a.Name, protocol, model.ProtoRedis, model.ProtoHTTP)
		}
		out = append(out, op)
	}
	return out, nil
}

// Config is one request flow: a VM's requests to an appliance.
type Config struct {
	// Name names the flow in keys, paths and errors (e.g. "A/a1->kv").
	Name     string
	Protocol string // model.ProtoRedis or model.ProtoHTTP
	Ops      []Op
	// Outstanding > 0: closed loop with that many connections, one
	// request in flight on each. Otherwise Rate > 0: open loop, Poisson
	// arrivals of Rate requests/s.
	Outstanding int
	Rate        float64
	// Connections is an open-loop flow's pool (at least DefaultPool).
	Connections int
	// Dial opens a connection to the appliance (in the VM's namespace,
	// from its address).
	Dial func(ctx context.Context) (net.Conn, error)
	// Host is the HTTP Host header (default: "appliance").
	Host    string
	Seed    uint64
	Timeout time.Duration // per request (default DefaultTimeout)
	Logger  *slog.Logger
}

// Flow generates one request flow and counts what it completed.
type Flow struct {
	cfg    Config
	cum    []float64 // cumulative fractions
	key    string    // the flow's name made safe for keys and paths
	values map[int][]byte
	cvals  map[int][]byte

	done     []atomic.Int64 // requests completed, per op
	failed   atomic.Int64
	dropped  atomic.Int64
	inFlight atomic.Int64
}

var unsafeKey = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// New checks a flow's configuration and prepares its payloads.
func New(cfg Config) (*Flow, error) {
	if cfg.Protocol != model.ProtoRedis && cfg.Protocol != model.ProtoHTTP {
		return nil, fmt.Errorf("loadgen: flow %s: protocol %q: want %s or %s", cfg.Name, cfg.Protocol, model.ProtoRedis, model.ProtoHTTP)
	}
	if len(cfg.Ops) == 0 {
		return nil, fmt.Errorf("loadgen: flow %s: no requests in the mix", cfg.Name)
	}
	if cfg.Outstanding <= 0 && !(cfg.Rate > 0) {
		return nil, fmt.Errorf("loadgen: flow %s: want outstanding > 0 (closed loop) or a rate > 0 (open loop)", cfg.Name)
	}
	if cfg.Outstanding > 4096 || cfg.Rate > 1e7 {
		return nil, fmt.Errorf("loadgen: flow %s: %d outstanding or %g requests/s is beyond what one machine generates", cfg.Name, cfg.Outstanding, cfg.Rate)
	}
	if cfg.Dial == nil {
		return nil, fmt.Errorf("loadgen: flow %s: no dialer", cfg.Name)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Host == "" {
		cfg.Host = "appliance"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Flow{cfg: cfg, key: unsafeKey.ReplaceAllString(cfg.Name, "_"), values: map[int][]byte{}, cvals: map[int][]byte{},
		done: make([]atomic.Int64, len(cfg.Ops))}
	sum := 0.0
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6c6f616467656e)) // payload bytes
	for _, op := range cfg.Ops {
		if !(op.Fraction > 0) {
			return nil, fmt.Errorf("loadgen: flow %s: type %s: fraction %v: want > 0", cfg.Name, op.Type, op.Fraction)
		}
		sum += op.Fraction
		f.cum = append(f.cum, sum)
		if op.Read {
			continue
		}
		if op.Compressible {
			if f.cvals[op.Size] == nil {
				f.cvals[op.Size] = compressible(op.Size)
			}
		} else if f.values[op.Size] == nil {
			b := make([]byte, op.Size)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			f.values[op.Size] = b
		}
	}
	for i := range f.cum {
		f.cum[i] /= sum
	}
	return f, nil
}

// compressible returns n bytes of a repeated text line.
func compressible(n int) []byte {
	line := []byte("bulkhead compressible payload 0123456789 abcdefghijklmnopqrstuvwxyz\n")
	b := make([]byte, n)
	for i := 0; i < n; i += len(line) {
		copy(b[i:], line)
	}
	return b
}

// Config returns the flow's configuration.
func (f *Flow) Config() Config { return f.cfg }

// Completed returns the requests completed so far, per op (cumulative).
func (f *Flow) Completed() []int64 {
	out := make([]int64, len(f.done))
	for i := range f.done {
		out[i] = f.done[i].Load()
	}
	return out
}

// Add counts n requests of op (an index into Config.Ops) completed by a
// client outside the flow's own generator (redis-benchmark, for one).
func (f *Flow) Add(op int, n int64) { f.done[op].Add(n) }

// Totals returns the requests completed so far and their tokens
// (cumulative).
func (f *Flow) Totals() (requests int64, tokens float64) {
	for i, n := range f.Completed() {
		requests += n
		tokens += float64(n) * f.cfg.Ops[i].Tokens
	}
	return requests, tokens
}

// Failed is the number of requests that failed (an error reply, a broken
// connection, a timeout).
func (f *Flow) Failed() int64 { return f.failed.Load() }

// Dropped is the number of open-loop arrivals dropped with a full backlog.
func (f *Flow) Dropped() int64 { return f.dropped.Load() }

// readKey and readPath name the stored object a read of size bytes gets.
func readKey(size int) string  { return "bulkhead:get:" + strconv.Itoa(size) }
func readPath(size int) string { return "/bulkhead/read-" + strconv.Itoa(size) }

// Prepare stores the objects the flow's reads get (one per size; the same
// for every flow, so preparing twice is harmless).
func (f *Flow) Prepare(ctx context.Context) error {
	c, err := f.dial(ctx, 0)
	if err != nil {
		return fmt.Errorf("loadgen: flow %s: prepare: %w", f.cfg.Name, err)
	}
	defer c.close()
	seen := map[int]bool{}
	for _, op := range f.cfg.Ops {
		if !op.Read || seen[op.Size] {
			continue
		}
		seen[op.Size] = true
		val := compressible(op.Size)
		var err error
		if f.cfg.Protocol == model.ProtoRedis {
			err = c.set(readKey(op.Size), val)
		} else {
			err = c.put(readPath(op.Size), val)
		}
		if err != nil {
			return fmt.Errorf("loadgen: flow %s: store the object of %d-byte reads: %w", f.cfg.Name, op.Size, err)
		}
	}
	return nil
}

// Run generates the flow's requests until ctx ends (one phase; phase
// seeds its random streams) and returns nil then. It returns an error
// when the appliance cannot be reached, or fails maxConsecutiveErrors
// requests in a row on a connection.
func (f *Flow) Run(ctx context.Context, phase int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	fail := func(err error) { cancel(err) }
	if f.cfg.Outstanding > 0 {
		for k := 0; k < f.cfg.Outstanding; k++ {
			rng := rand.New(rand.NewPCG(f.cfg.Seed^uint64(phase)<<48, uint64(k)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f.worker(ctx, k, func() (int, bool) { return f.draw(rng), true }); err != nil {
					fail(err)
				}
			}()
		}
	} else {
		backlog := make(chan int, MaxBacklog)
		pool := max(f.cfg.Connections, DefaultPool)
		for k := 0; k < pool; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				next := func() (int, bool) {
					select {
					case i := <-backlog:
						return i, true
					case <-ctx.Done():
						return 0, false
					}
				}
				if err := f.worker(ctx, k, next); err != nil {
					fail(err)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.arrivals(ctx, rand.New(rand.NewPCG(f.cfg.Seed^uint64(phase)<<48, 1<<40)), backlog)
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("loadgen: flow %s: %w", f.cfg.Name, err)
	}
	return nil
}

// draw picks a mix entry by fraction.
func (f *Flow) draw(rng *rand.Rand) int {
	u := rng.Float64()
	for i, c := range f.cum {
		if u < c {
			return i
		}
	}
	return len(f.cum) - 1
}

// arrivals puts Poisson arrivals into the backlog until ctx ends. It
// sleeps until the next arrival when it is at least a millisecond away
// and otherwise releases every arrival that is due, so that tens of
// thousands of arrivals a second cost no timer each.
func (f *Flow) arrivals(ctx context.Context, rng *rand.Rand, backlog chan<- int) {
	gap := func() time.Duration { return time.Duration(rng.ExpFloat64() / f.cfg.Rate * float64(time.Second)) }
	next := time.Now().Add(gap())
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := time.Now()
		for !next.After(now) {
			select {
			case backlog <- f.draw(rng):
			default:
				f.dropped.Add(1)
			}
			next = next.Add(gap())
		}
		t.Reset(max(time.Until(next), time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// worker runs one connection: the next request from next, one at a time,
// reconnecting after a failure, until ctx ends or next says so.
func (f *Flow) worker(ctx context.Context, k int, next func() (int, bool)) error {
	var c *conn
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	consecutive := 0
	var last error
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = f.dial(ctx, k); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				consecutive++
				last = err
				if consecutive >= maxConsecutiveErrors {
					return fmt.Errorf("connection %d: %d failures in a row, the last: %w", k, consecutive, last)
				}
				sleep(ctx, 20*time.Millisecond)
				continue
			}
		}
		i, ok := next()
		if !ok {
			return nil
		}
		err := c.do(&f.cfg.Ops[i], f)
		if err == nil {
			f.done[i].Add(1)
			consecutive = 0
			if c.closeAfter {
				c.close()
				c = nil
			}
			continue
		}
		if ctx.Err() != nil {
			return nil // the phase ended with the request in flight
		}
		f.failed.Add(1)
		consecutive++
		last = err
		f.cfg.Logger.Debug("request failed", "flow", f.cfg.Name, "conn", k, "type", f.cfg.Ops[i].Type, "err", err)
		if consecutive >= maxConsecutiveErrors {
			return fmt.Errorf("connection %d: %d failures in a row, the last: %w", k, consecutive, last)
		}
		c.close()
		c = nil
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// conn is one client connection.
type conn struct {
	c          net.Conn
	r          *bufio.Reader
	w          *bufio.Writer
	f          *Flow
	k          int
	stop       func() bool
	timeout    time.Duration
	closeAfter bool // the server closes the connection after its reply
	line       []byte
}

func (f *Flow) dial(ctx context.Context, k int) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	nc, err := f.cfg.Dial(dctx)
	if err != nil {
		return nil, err
	}
	c := &conn{c: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 64<<10), f: f, k: k, timeout: f.cfg.Timeout}
	// a request in flight when the phase ends is cut off
	c.stop = context.AfterFunc(ctx, func() { nc.Close() })
	return c, nil
}

func (c *conn) close() {
	c.stop()
	c.c.Close()
}

// do sends one request of op and reads its reply.
func (c *conn) do(op *Op, f *Flow) error {
	if err := c.c.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return err
	}
	f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	switch {
	case f.cfg.Protocol == model.ProtoRedis && op.Read:
		return c.get(readKey(op.Size), op.Size)
	case f.cfg.Protocol == model.ProtoRedis:
		return c.set("bulkhead:put:"+f.key+":"+strconv.Itoa(c.k), f.values[op.Size])
	case op.Read:
		return c.getFile(readPath(op.Size), op.Size)
	case op.Compressible:
		return c.put("/bulkhead/"+f.key+"/"+strconv.Itoa(c.k), f.cvals[op.Size])
	default:
		return c.put("/bulkhead/"+f.key+"/"+strconv.Itoa(c.k), f.values[op.Size])
	}
}

// RESP (Redis)

func (c *conn) bulk(s []byte) {
	c.w.WriteByte('$')
	c.w.WriteString(strconv.Itoa(len(s)))
	c.w.WriteString("\r\n")
	c.w.Write(s)
	c.w.WriteString("\r\n")
}

func (c *conn) set(key string, val []byte) error {
	c.w.WriteString("*3\r\n$3\r\nSET\r\n")
	c.bulk([]byte(key))
	c.bulk(val)
	if err := c.w.Flush(); err != nil {
		return err
	}
	line, err := c.readLine()
	if err != nil {
		return err
	}
	if string(line) != "+OK" {
		return fmt.Errorf("SET %s: reply %q", key, trim(line))
	}
	return nil
}

func (c *conn) get(key string, size int) error {
	c.w.WriteString("*2\r\n$3\r\nGET\r\n")
	c.bulk([]byte(key))
	if err := c.w.Flush(); err != nil {
		return err
	}
	line, err := c.readLine()
	if err != nil {
		return err
	}
	if len(line) == 0 || line[0] != '$' {
		return fmt.Errorf("GET %s: reply %q", key, trim(line))
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n < 0 {
		return fmt.Errorf("GET %s: reply %q (the key is not stored: was the flow prepared?)", key, trim(line))
	}
	if n != size {
		return fmt.Errorf("GET %s: %d bytes, want %d", key, n, size)
	}
	if _, err := c.r.Discard(n + 2); err != nil {
		return err
	}
	return nil
}

// readLine reads a CRLF-terminated line (without it).
func (c *conn) readLine() ([]byte, error) {
	c.line = c.line[:0]
	for {
		b, err := c.r.ReadSlice('\n')
		c.line = append(c.line, b...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) || len(c.line) > 64<<10 {
			return nil, err
		}
	}
	return bytes.TrimSuffix(bytes.TrimSuffix(c.line, []byte("\n")), []byte("\r")), nil
}

func trim(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// HTTP/1.1 (nginx with WebDAV PUT)

func (c *conn) put(path string, body []byte) error {
	fmt.Fprintf(c.w, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", path, c.f.cfg.Host, len(body))
	c.w.Write(body)
	if err := c.w.Flush(); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.closeAfter = resp.Close
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: %s", path, resp.Status)
	}
	return nil
}

func (c *conn) getFile(path string, size int) error {
	fmt.Fprintf(c.w, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, c.f.cfg.Host)
	if err := c.w.Flush(); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.r, &http.Request{Method: http.MethodGet})
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.closeAfter = resp.Close
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s (the file is not stored: was the flow prepared?)", path, resp.Status)
	}
	if n != int64(size) {
		return fmt.Errorf("GET %s: %d bytes, want %d", path, n, size)
	}
	return nil
}

// DialFrom returns a dialer of TCP connections to addr from a local
// address (its port chosen by the kernel), opened by do — in a network
// namespace, for instance (dataplane.NS.Do).
func DialFrom(local netip.Addr, addr netip.AddrPort, do func(func() error) error) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var c net.Conn
		err := do(func() error {
			d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0))}
			var err error
			c, err = d.DialContext(ctx, "tcp4", addr.String())
			return err
		})
		return c, err
	}
}
