package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkhead-dc/bulkhead/proxy/httpfs"
	"github.com/bulkhead-dc/bulkhead/proxy/resp"
)

// flushReader flushes w before every read of r: whatever was relayed is
// sent before the relay waits for more input.
type flushReader struct {
	r io.Reader
	w *bufio.Writer
}

func (f flushReader) Read(p []byte) (int, error) {
	if f.w.Buffered() > 0 {
		if err := f.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.r.Read(p)
}

// active counts a connection's reads and writes that move bytes (n, the
// relay's progress, for its idle timeout); it hides the connection's
// ReadFrom from bufio.Writer.
type active struct {
	conn net.Conn
	n    *atomic.Uint64
}

func (a active) Read(p []byte) (int, error) {
	n, err := a.conn.Read(p)
	if n > 0 {
		a.n.Add(1)
	}
	return n, err
}

func (a active) Write(p []byte) (int, error) {
	n, err := a.conn.Write(p)
	if n > 0 {
		a.n.Add(1)
	}
	return n, err
}

// framingError is a client's request the proxy cannot frame: the client
// gets reply (after the replies to its earlier requests) and the connection
// closes.
type framingError struct {
	err   error
	reply []byte
}

func (e *framingError) Error() string { return e.err.Error() }
func (e *framingError) Unwrap() error { return e.err }

// conn is one relayed client connection and its connection to the
// appliance. The request goroutine reads the client and writes the server
// (sw); the reply goroutine reads the server and writes the client (cw).
type conn struct {
	p              *Proxy
	f              *flow
	client, server net.Conn
	cr, sr         active // the client's and the server's reads and writes
	sw, cw         *bufio.Writer
	pending        chan *exchange // forwarded, reply not yet started
	beforeWait     func() error   // before the request side waits for tokens

	// state counts the requests enqueued whose reply is not complete,
	// plus stateEOF once the request side is done; drained is closed when
	// it is exactly stateEOF.
	state     atomic.Int64
	drained   chan struct{}
	drainOnce sync.Once
	cur       atomic.Pointer[exchange] // the reply side's exchange in progress
	// passAfter is the number of exchanges whose replies match, once a
	// request switched the connection to passthrough (-1 until then).
	passAfter atomic.Int64

	serverEnded atomic.Bool // the appliance ended the connection
	stopping    atomic.Bool // the request side is closing the connections
	closeOnce   sync.Once

	// Idleness: the reads and writes done on either connection, whether
	// the request side waits for its flow's tokens (the proxy holds it:
	// not idle), whether the connections were closed for idleness.
	progress atomic.Uint64
	holding  atomic.Bool
	idle     atomic.Bool
}

func newConn(p *Proxy, f *flow, client, server net.Conn) *conn {
	c := &conn{
		p: p, f: f, client: client, server: server,
		pending: make(chan *exchange, p.cfg.MaxInFlight),
		drained: make(chan struct{}),
	}
	c.cr, c.sr = active{client, &c.progress}, active{server, &c.progress}
	c.sw = bufio.NewWriterSize(c.sr, p.cfg.BufferSize)
	c.cw = bufio.NewWriterSize(c.cr, p.cfg.BufferSize)
	c.beforeWait = func() error {
		c.holding.Store(true)
		return c.sw.Flush()
	}
	c.passAfter.Store(-1)
	return c
}

// admit admits what ex's request adds (f.admit), flushing what was relayed
// to the appliance before it waits; while it waits, the connection is not
// idle.
func (c *conn) admit(ctx context.Context, ex *exchange, reqWire, reqSize int64) error {
	err := c.f.admit(ctx, ex, reqWire, reqSize, c.beforeWait)
	if c.holding.Load() {
		c.holding.Store(false)
	}
	return err
}

// watchIdle closes the connections once nothing has moved on them for
// timeout (real time; see Config.IdleTimeout): every timeout, it checks
// that a read or a write completed since the last check, or that the
// request side waits for tokens. It returns the function that stops it.
func (c *conn) watchIdle(timeout time.Duration) (stop func()) {
	var mu sync.Mutex
	var t *time.Timer
	stopped := false
	last := c.progress.Load()
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if n := c.progress.Load(); n != last || c.holding.Load() {
			last = n
			t.Reset(timeout)
			return
		}
		c.idle.Store(true)
		c.closeBoth()
	}
	mu.Lock()
	t = time.AfterFunc(timeout, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

func (c *conn) closeBoth() {
	c.closeOnce.Do(func() {
		c.client.Close()
		c.server.Close()
	})
}

// stateEOF marks conn.state when the request side is done.
const stateEOF = 1 << 62

// enqueue hands ex to the reply side, flushing the server's writer before
// waiting for room (at MaxInFlight the request side stops reading).
func (c *conn) enqueue(ctx context.Context, ex *exchange) error {
	c.state.Add(1)
	select {
	case c.pending <- ex:
		return nil
	default:
	}
	if err := c.sw.Flush(); err != nil {
		return err
	}
	select {
	case c.pending <- ex:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// take is the reply side's ex, now in progress (nil: done).
func (c *conn) take(ex *exchange) {
	c.cur.Store(ex)
}

// replied records a complete reply; when the request side is done and
// nothing is in flight, drained is closed.
func (c *conn) replied() {
	c.cur.Store(nil)
	c.checkDrained(c.state.Add(-1))
}

func (c *conn) checkDrained(state int64) {
	if state == stateEOF {
		c.drainOnce.Do(func() { close(c.drained) })
	}
}

// requestsDone marks the request side done: no more sends on pending.
func (c *conn) requestsDone() {
	close(c.pending)
	c.checkDrained(c.state.Add(stateEOF))
}

// abandon takes the exchanges left unanswered out of the statistics.
func (c *conn) abandon() {
	now := c.p.clock.Now()
	if cur := c.cur.Swap(nil); cur != nil {
		c.f.end(cur, now, nil)
	}
	for {
		select {
		case ex, ok := <-c.pending:
			if !ok {
				return
			}
			c.f.end(ex, now, nil)
		default:
			return
		}
	}
}

// errRequestsDone ends a reply side that has relayed the reply to every
// request and will get no more.
var errRequestsDone = errors.New("requests done")

// run runs the two sides of a relay and returns the error that ended it
// (nil for a clean close by either side). When the requests end (the
// client's end of stream, or a request it cannot frame), the replies to
// what was forwarded still come back before the connections close.
func (c *conn) run(ctx context.Context, requests func() error, replies func() error) error {
	replyErr := make(chan error, 1)
	go func() {
		err := replies()
		c.cw.Flush()
		if errors.Is(err, errRequestsDone) {
			// Every reply relayed and no more requests: not the
			// appliance's end (run closes the connections).
			err = nil
		} else if !c.stopping.Load() { // the appliance ended the connection
			c.serverEnded.Store(true)
			c.closeBoth()
		}
		replyErr <- err
	}()
	reqErr := requests()
	c.sw.Flush()
	c.requestsDone()
	var fe *framingError
	isFraming := errors.As(reqErr, &fe)
	done := false
	var rErr error
	if reqErr == nil || isFraming {
		select {
		case <-c.drained:
		case rErr = <-replyErr:
			done = true
		case <-ctx.Done():
		}
	}
	c.stopping.Store(true)
	c.server.Close() // ends the reply side, which flushes the client's writer
	if !done {
		rErr = <-replyErr
	}
	if isFraming && !c.serverEnded.Load() {
		c.client.Write(fe.reply) // best effort: the connection closes
	}
	c.closeBoth()
	if c.serverEnded.Load() && !isFraming {
		return rErr
	}
	return reqErr
}

// Redis commands after which replies no longer match requests one to one:
// the connection relays replies unmatched until it closes. The
// unsubscribing ones are here too: under RESP3 every (un)subscription's
// confirmation is a push, the reply to no request.
var passthroughCommands = map[string]bool{
	"subscribe": true, "psubscribe": true, "ssubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true,
	"monitor": true,
}

// passthroughAllowed are the requests relayed once replies no longer match
// requests: those Redis accepts from a RESP2 subscriber (but RESET, which
// would end its subscriptions and let ordinary commands through).
var passthroughAllowed = map[string]bool{
	"subscribe": true, "psubscribe": true, "ssubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true,
	"ping": true, "quit": true,
}

// refuseRESP returns the framing error that refuses a request (nil: relay
// it), judged by its first Segment, before any of its bytes is forwarded:
// every request the proxy relays must be answered by one reply it can
// match, except in passthrough, where only the requests whose replies are
// themselves unmatched messages pass (see the package documentation).
func refuseRESP(seg resp.Segment, passthrough bool) error {
	var why string
	switch {
	case seg.Name == "client" && seg.Sub == "reply":
		why = "CLIENT REPLY refused: every request is answered"
	case seg.Name == "sync" || seg.Name == "psync" || seg.Name == "replconf":
		why = fmt.Sprintf("%q refused: a client does not replicate through the proxy", seg.Name)
	case passthrough && !passthroughAllowed[seg.Name]:
		why = fmt.Sprintf("%q refused after SUBSCRIBE or MONITOR: only (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING and QUIT are relayed; reconnect for other commands", seg.Name)
	default:
		return nil
	}
	err := fmt.Errorf("resp requests: at byte %d: %s", seg.Offset, why)
	return &framingError{err: err, reply: fmt.Appendf(nil, "-ERR bulkhead proxy: %s\r\n", err)}
}

func (c *conn) relayRESP(ctx context.Context) error {
	size, lim := c.p.cfg.BufferSize, c.p.cfg.RESP
	rr, err := resp.NewReader(flushReader{c.cr, c.sw}, resp.Requests, size, lim)
	if err != nil {
		return err
	}
	pr, err := resp.NewReader(flushReader{c.sr, c.cw}, resp.Replies, size, lim)
	if err != nil {
		return err
	}
	return c.run(ctx, func() error { return c.respRequests(ctx, rr) }, func() error { return c.respReplies(pr) })
}

func (c *conn) respRequests(ctx context.Context, rr *resp.Reader) error {
	var ex *exchange
	passthrough := false
	var enqueued int64
	for {
		seg, err := rr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			var re *resp.Error
			if errors.As(err, &re) && !errors.Is(err, io.ErrUnexpectedEOF) {
				return &framingError{err: err, reply: fmt.Appendf(nil, "-ERR bulkhead proxy: %s\r\n", bytes.ReplaceAll([]byte(re.Error()), []byte("\r\n"), []byte(" ")))}
			}
			return fmt.Errorf("reading requests: %w", err)
		}
		if seg.Start {
			if err := refuseRESP(seg, passthrough); err != nil {
				return err
			}
			ex = c.f.newExchange(seg.Name)
			if !passthrough && passthroughCommands[seg.Name] {
				// Replies match the requests enqueued so far, and no
				// later one: the reply side stops matching after them.
				c.passAfter.Store(enqueued)
				passthrough = true
			}
			if passthrough {
				// Its replies are charged as they pass (unmatched), not
				// expected.
				ex.respWire, ex.respSize = 0, 0
			}
		}
		if err := c.admit(ctx, ex, seg.Wire, seg.Size); err != nil {
			return err
		}
		if seg.Start && !passthrough {
			if err := c.enqueue(ctx, ex); err != nil {
				return err
			}
			enqueued++
		}
		if _, err := c.sw.Write(seg.Bytes); err != nil {
			return fmt.Errorf("writing to the appliance: %w", err)
		}
		if seg.End && passthrough { // unmatched: not outstanding
			c.f.end(ex, c.p.clock.Now(), nil)
		}
	}
}

func (c *conn) respReplies(pr *resp.Reader) error {
	var ex *exchange
	passthrough := false
	var answered int64
	var debt replyDebt
	defer debt.settle(c.f)
	for {
		seg, err := pr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading replies: %w", err)
		}
		if seg.Start {
			if !passthrough && answered == c.passAfter.Load() {
				passthrough = true
			}
			if !seg.Push && !passthrough {
				select {
				case ex = <-c.pending:
				default:
				}
				if ex == nil {
					c.p.log.Warn("reply to no request", "flow", c.f.id, "offset", seg.Offset)
				}
				c.take(ex)
			}
		}
		if _, err := c.cw.Write(seg.Bytes); err != nil {
			return fmt.Errorf("writing to the client: %w", err)
		}
		if !seg.End {
			continue
		}
		if ex == nil {
			// A push, a message to a subscriber or monitor: the reply
			// to no request.
			if err := debt.add(c.f, seg.Wire); err != nil {
				return err
			}
			continue
		}
		if err := c.f.answered(ex, seg.Wire, seg.Size); err != nil {
			return err
		}
		ex = nil
		answered++
		c.replied()
	}
}

// replyDebt charges a connection's unmatched replies (pushes, a
// subscriber's or a monitor's messages) their bytes on the reverse links,
// as debt: at most one such debt of the connection waits in its flow's
// queue at a time, and the bytes of the replies that pass meanwhile are
// owed and charged together after it, so that the queue stays bounded
// however many messages the appliance sends.
type replyDebt struct {
	owed   int64
	queued *ticket // the debt waiting in the queue, nil if none
}

func (d *replyDebt) add(f *flow, wire int64) error {
	d.owed += wire
	if d.queued != nil {
		select {
		case <-d.queued.done:
			d.queued = nil
		default:
			return nil
		}
	}
	t, err := f.unmatched(d.owed)
	d.owed, d.queued = 0, t
	return err
}

// settle charges what is owed when the connection ends.
func (d *replyDebt) settle(f *flow) {
	if d.owed > 0 {
		if _, err := f.unmatched(d.owed); err != nil {
			f.p.log.Warn("unmatched replies not charged", "flow", f.id, "bytes", d.owed, "err", err)
		}
		d.owed = 0
	}
}

func (c *conn) relayHTTP(ctx context.Context) error {
	size, lim := c.p.cfg.BufferSize, c.p.cfg.HTTP
	hr := httpfs.NewReader(flushReader{c.cr, c.sw}, size, lim)
	sr := httpfs.NewReader(flushReader{c.sr, c.cw}, size, lim)
	return c.run(ctx, func() error { return c.httpRequests(ctx, hr) }, func() error { return c.httpReplies(sr) })
}

// httpStatus is a framing error's response.
func httpStatus(code int, err error) []byte {
	msg := err.Error() + "\n"
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), len(msg), msg)
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

func (c *conn) httpRequests(ctx context.Context, hr *httpfs.Reader) error {
	var head bytes.Buffer
	buf := make([]byte, 32<<10)
	for {
		if hr.AtEOF() {
			return nil
		}
		req, err := hr.ReadRequest()
		if err != nil {
			switch {
			case errors.Is(err, httpfs.ErrHeaderTooLarge):
				return &framingError{err: err, reply: httpStatus(http.StatusRequestHeaderFieldsTooLarge, err)}
			case isNetErr(err):
				return fmt.Errorf("reading requests: %w", err)
			}
			return &framingError{err: err, reply: httpStatus(http.StatusBadRequest, err)}
		}
		ex := c.f.newExchange(httpfs.Type(req))
		ex.method = req.Method
		head.Reset()
		hn, _ := httpfs.WriteRequestHead(&head, req)
		chunked := httpfs.Chunked(req.TransferEncoding)
		if e := httpfs.Expected(req); e > 0 {
			ex.respWire, ex.respSize = e, e // ex is not shared yet
		}
		if err := c.admit(ctx, ex, hn+max(req.ContentLength, 0), max(req.ContentLength, 0)); err != nil {
			return err
		}
		if err := c.enqueue(ctx, ex); err != nil {
			return err
		}
		if _, err := c.sw.Write(head.Bytes()); err != nil {
			return fmt.Errorf("writing to the appliance: %w", err)
		}
		if req.Body != nil && req.Body != http.NoBody {
			// A body of declared length was charged whole with the
			// head; a chunked one is admitted as it streams, each part
			// charged before it is forwarded, as a RESP request's later
			// segments are.
			var before func(payload, wire int64) error
			if chunked {
				before = func(payload, wire int64) error {
					return c.admit(ctx, ex, hn+wire, payload)
				}
			}
			payload, wire, err := httpfs.CopyBody(c.sw, req.Body, chunked, &req.Trailer, buf, before)
			if err != nil {
				return fmt.Errorf("relaying a %s body: %w", req.Method, err)
			}
			// What the admissions did not cover (nothing, by CopyBody's
			// count): debt.
			if err := c.f.debt(ex, hn+wire, payload); err != nil {
				return err
			}
		}
		if req.Close {
			return nil
		}
	}
}

func (c *conn) httpReplies(sr *httpfs.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		var ex *exchange
		ok := true
		select {
		case ex, ok = <-c.pending:
		default:
			if err := c.cw.Flush(); err != nil { // before waiting for a request
				return fmt.Errorf("writing to the client: %w", err)
			}
			ex, ok = <-c.pending
		}
		if !ok {
			return errRequestsDone
		}
		c.take(ex)
		var rs *http.Response
		var wire int64
		for {
			r, err := sr.ReadResponse(ex.method)
			if err != nil {
				return fmt.Errorf("reading the response to a %s: %w", ex.method, err)
			}
			if r.StatusCode == http.StatusSwitchingProtocols {
				return fmt.Errorf("response to a %s: protocol switch not supported", ex.method)
			}
			n, err := httpfs.WriteResponseHead(c.cw, r)
			wire += n
			if err != nil {
				return fmt.Errorf("writing to the client: %w", err)
			}
			if r.StatusCode >= 200 {
				rs = r
				break
			}
			// 1xx: informational, the final response follows.
		}
		payload, bw, err := httpfs.CopyBody(c.cw, rs.Body, httpfs.Chunked(rs.TransferEncoding), &rs.Trailer, buf, nil)
		if err != nil {
			return fmt.Errorf("relaying the response to a %s: %w", ex.method, err)
		}
		if err := c.f.answered(ex, wire+bw, payload); err != nil {
			return err
		}
		c.replied()
		if rs.Close {
			return nil
		}
	}
}
