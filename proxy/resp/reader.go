// Package resp frames the Redis serialization protocol (RESP2 and RESP3) as
// a stream, for a proxy that forwards it byte for byte: a Reader cuts one
// direction of a connection into Segments — runs of raw bytes, each belonging
// to one message (a client request, or a server reply) — and tells, for each,
// what the message is (a request's command name, a reply that is a RESP3
// push) and how large it has been declared to be so far.
//
// Memory is bounded per Reader by its buffer (DefaultBufferSize, 64 KiB):
// a bulk string of any size is handed out in buffer-sized Segments as it
// arrives, never held whole. Every input is bounded (Limits: line length,
// inline command length, aggregate length, nesting depth, command name
// length); a malformed or over-limit stream yields an *Error that says what
// and at which byte offset of the stream, and the Reader stops there.
//
// Requests (Mode Requests) are what a Redis server accepts: arrays of bulk
// strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), or inline commands (one line
// of space-separated words, "PING\r\n"). Like Redis, the Reader skips empty
// inline lines and arrays of length 0 or -1, which get no reply; they are
// consumed, not handed out.
//
// Replies (Mode Replies) may be any RESP2 or RESP3 type: simple string (+),
// simple error (-), integer (:), bulk string ($, $-1 the RESP2 null), array
// (*, *-1 the RESP2 null array), null (_), double (,), boolean (#), big number
// ((), verbatim string (=), map (%), set (~), attribute (|), push (>), blob
// error (!), nested to Limits.MaxDepth. An attribute annotates the element
// that follows it and is part of that element's message. RESP3's streamed
// strings and aggregates ($?, *? ...), which no Redis server sends, are
// refused.
//
// Sizes. A Segment carries the message's cumulative Wire bytes (its length
// on the wire as far as declared: every header line scanned, every bulk's
// declared length and CRLF) and Size, the payload bytes a cost function
// takes: for a request, the sum of the lengths of its arguments after the
// command name (for "SET k v", len(k)+len(v)); for a reply, the sum of the
// lengths of its strings (bulk, verbatim and blob error contents, and the
// text of simple strings, errors, integers, doubles, booleans and big
// numbers). A bulk's length counts as soon as its header is scanned, before
// its bytes arrive, so the first Segment of "SET k <50 MB>" already declares
// the whole request.
//
// Command names are normalized to lower case ASCII ("GET", "get" and "Get"
// are "get"), the first word only: "CLIENT SETNAME x" is "client". For a
// command whose first argument names a subcommand (Redis' container
// commands: CLIENT, CONFIG, OBJECT ...; see HasSubcommand) the Reader also
// reads that argument, normalized the same way, before it hands out the
// request's first Segment ("CLIENT REPLY OFF" is "client" with Sub
// "reply"), so that a proxy can judge the request before forwarding a byte
// of it; such a subcommand is bounded like a name (Limits.MaxName), and the
// request's head (its header, name and subcommand) must fit in the buffer.
package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// DefaultBufferSize is a Reader's buffer size when none is given.
const DefaultBufferSize = 64 << 10

// minBufferSize is the smallest buffer a Reader accepts: room for a
// request's array header, its command name's header and a short name.
const minBufferSize = 64

// Mode says which direction of a connection a Reader parses.
type Mode int

const (
	// Requests parses what a client sends: arrays of bulk strings and
	// inline commands.
	Requests Mode = iota
	// Replies parses what a server sends: any RESP2 or RESP3 value.
	Replies
)

func (m Mode) String() string {
	if m == Requests {
		return "requests"
	}
	return "replies"
}

// Limits bound a Reader's input. Zero fields take their defaults.
type Limits struct {
	// MaxLine is the longest header or simple line, CRLF included
	// (default and maximum: the buffer size).
	MaxLine int
	// MaxInline is the longest inline command, line end included (default
	// and maximum: the buffer size; Redis' own limit is 64 KiB).
	MaxInline int
	// MaxArray is the most elements of an aggregate (a map's or an
	// attribute's pairs count twice; default math.MaxInt32, Redis' bound on
	// a request's argument count).
	MaxArray int64
	// MaxDepth is the deepest nesting of aggregates (default 64; requests
	// always have depth 1).
	MaxDepth int
	// MaxName is the longest command name of a request (default 128, at
	// most the buffer size less 48).
	MaxName int
}

const (
	defaultMaxArray = 1<<31 - 1
	defaultMaxDepth = 64
	defaultMaxName  = 128
)

func (l Limits) withDefaults(size int) Limits {
	if l.MaxLine <= 0 || l.MaxLine > size {
		l.MaxLine = size
	}
	if l.MaxInline <= 0 || l.MaxInline > size {
		l.MaxInline = size
	}
	if l.MaxArray <= 0 {
		l.MaxArray = defaultMaxArray
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = defaultMaxDepth
	}
	if l.MaxName <= 0 {
		l.MaxName = defaultMaxName
	}
	if l.MaxName > size-48 {
		l.MaxName = size - 48
	}
	return l
}

// Errors a Reader reports, wrapped in an *Error; match them with errors.Is.
var (
	// ErrSyntax reports bytes that are not RESP.
	ErrSyntax = errors.New("syntax error")
	// ErrLimit reports input beyond one of the Limits.
	ErrLimit = errors.New("limit exceeded")
	// ErrUnsupported reports valid RESP3 the Reader does not handle
	// (streamed strings and aggregates).
	ErrUnsupported = errors.New("unsupported")
)

// Error is a framing error: what went wrong and the offset, from the start
// of the stream, of the byte (or the line) where it did. Err is ErrSyntax,
// ErrLimit, ErrUnsupported or io.ErrUnexpectedEOF.
type Error struct {
	Mode   Mode
	Offset int64
	Msg    string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("resp %s: at byte %d: %s: %v", e.Mode, e.Offset, e.Msg, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Segment is a run of raw bytes of one message. Bytes are to be forwarded
// as they are; they stay valid until the next call to Next.
type Segment struct {
	Bytes []byte
	// Offset is the stream offset of Bytes[0].
	Offset int64
	// Start: this Segment begins a message. End: the message is complete
	// after Bytes.
	Start, End bool
	// Name is a request's normalized command name (on every Segment of
	// the request).
	Name string
	// Sub is the normalized subcommand of a request whose command has
	// subcommands (HasSubcommand), on every Segment of the request; ""
	// for other commands or when the request has no argument after the
	// name.
	Sub string
	// Push marks a reply that is a RESP3 push message (out of band, not
	// the reply to a request), on every Segment of it.
	Push bool
	// Size and Wire are the message's cumulative payload and wire bytes
	// declared so far (see the package documentation).
	Size, Wire int64
}

// frame is one open aggregate: the elements it still expects.
type frame struct {
	left int64
	attr bool
}

// Reader cuts a stream into Segments. It is not safe for concurrent use.
type Reader struct {
	br   *bufio.Reader
	size int
	mode Mode
	lim  Limits

	off  int64 // stream offset of br's first unread byte
	held int   // bytes of the last Segment, discarded by the next Next
	err  error // sticky

	inMsg bool
	stack []frame
	bulk  int64 // bytes left of the current bulk payload, CRLF included
	name  bool  // requests: the next bulk is the command name
	sub   bool  // requests: the next bulk is the subcommand
	cur   Segment

	names map[string]string // interned command names
}

// maxHeader bounds a request's header lines ("*<n>" and "$<n>" with CRLF).
const maxHeader = 32

// maxLength bounds a bulk string's declared length (2^53: lengths and sums
// of them stay exact in a float64 cost).
const maxLength = 1 << 53

// maxNames bounds the interned command names of a Reader.
const maxNames = 256

// NewReader returns a Reader of r in the given mode with a buffer of size
// bytes (0: DefaultBufferSize; at least 64).
func NewReader(r io.Reader, mode Mode, size int, lim Limits) (*Reader, error) {
	if size == 0 {
		size = DefaultBufferSize
	}
	if size < minBufferSize {
		return nil, fmt.Errorf("resp: NewReader: buffer of %d bytes, want at least %d", size, minBufferSize)
	}
	if mode != Requests && mode != Replies {
		return nil, fmt.Errorf("resp: NewReader: unknown mode %d", int(mode))
	}
	return &Reader{
		br:   bufio.NewReaderSize(r, size),
		size: size,
		mode: mode,
		lim:  lim.withDefaults(size),
	}, nil
}

// Limits returns the limits in force (defaults filled in).
func (r *Reader) Limits() Limits { return r.lim }

// Offset returns the stream offset of the first byte not yet handed out.
func (r *Reader) Offset() int64 { return r.off + int64(r.held) }

// Buffered returns the bytes read from the underlying reader and not yet
// handed out.
func (r *Reader) Buffered() int { return r.br.Buffered() - r.held }

// InMessage reports whether the bytes handed out so far end inside a
// message.
func (r *Reader) InMessage() bool { return r.inMsg }

// Next returns the next Segment. At the end of the stream between two
// messages it returns io.EOF; anywhere else an *Error (io.ErrUnexpectedEOF
// for a truncated message). Errors from the underlying reader are returned
// as they are. After an error, Next returns it again.
func (r *Reader) Next() (Segment, error) {
	if r.err != nil {
		return Segment{}, r.err
	}
	if r.held > 0 {
		r.discard(r.held)
		r.held = 0
	}
	seg, err := r.next()
	if err != nil {
		r.err = err
		return Segment{}, err
	}
	return seg, nil
}

func (r *Reader) discard(n int) {
	d, _ := r.br.Discard(n) // n <= Buffered: cannot fail
	r.off += int64(d)
}

func (r *Reader) fail(pos int, err error, format string, args ...any) error {
	return &Error{Mode: r.mode, Offset: r.off + int64(pos), Msg: fmt.Sprintf(format, args...), Err: err}
}

// view returns every buffered byte.
func (r *Reader) view() []byte {
	b, _ := r.br.Peek(r.br.Buffered())
	return b
}

// grow waits for at least one byte beyond the n buffered. pos is where the
// scan stands, for errors.
func (r *Reader) grow(n, pos int) error {
	_, err := r.br.Peek(n + 1)
	if err == nil {
		return nil
	}
	if r.br.Buffered() > n {
		return nil // got some bytes, then an error: report it on the next read
	}
	if errors.Is(err, io.EOF) {
		if !r.inMsg && n == 0 {
			return io.EOF
		}
		what := "stream ends inside a message"
		if !r.inMsg {
			what = "stream ends inside a message header"
		}
		return r.fail(n, io.ErrUnexpectedEOF, "%s", what)
	}
	return err
}

// segment hands out the first pos buffered bytes.
func (r *Reader) segment(pos int, start, end bool) Segment {
	b, _ := r.br.Peek(pos)
	s := r.cur
	s.Bytes, s.Offset, s.Start, s.End = b, r.off, start, end
	r.held = pos
	if end {
		r.inMsg = false
		r.cur = Segment{}
	}
	return s
}

func (r *Reader) next() (Segment, error) {
	pos := 0
	start := !r.inMsg
	for {
		buf := r.view()
		if r.bulk > 0 {
			n := min(int64(len(buf)-pos), r.bulk)
			if err := r.checkBulkTail(buf, pos, n); err != nil {
				return Segment{}, err
			}
			pos += int(n)
			r.bulk -= n
			if r.bulk == 0 {
				if r.complete() {
					return r.segment(pos, start, true), nil
				}
				continue
			}
			// More payload to come: hand out what we have when waiting
			// could not bring the rest into the buffer anyway.
			if pos > 0 && r.bulk > int64(r.size-pos) {
				return r.segment(pos, start, false), nil
			}
			if err := r.grow(len(buf), len(buf)); err != nil {
				return Segment{}, err
			}
			continue
		}
		if pos == len(buf) {
			if pos == r.size { // the view is full of this message: hand it out
				if r.sub {
					return Segment{}, r.headTooLong(pos)
				}
				return r.segment(pos, start, false), nil
			}
			if err := r.grow(len(buf), pos); err != nil {
				return Segment{}, err
			}
			continue
		}
		limit, what := r.lim.MaxLine, "line"
		if r.mode == Requests {
			if !r.inMsg && buf[pos] != '*' {
				limit, what = r.lim.MaxInline, "inline command"
			} else {
				limit, what = maxHeader, "request header line"
			}
		}
		nl := bytes.IndexByte(buf[pos:], '\n')
		if nl >= limit || (nl < 0 && len(buf)-pos >= limit) {
			return Segment{}, r.fail(pos, ErrLimit, "%s longer than %d bytes", what, limit)
		}
		if nl < 0 {
			if len(buf) == r.size { // pos > 0: make room
				if r.sub {
					return Segment{}, r.headTooLong(pos)
				}
				return r.segment(pos, start, false), nil
			}
			if err := r.grow(len(buf), pos); err != nil {
				return Segment{}, err
			}
			continue
		}
		line := buf[pos : pos+nl+1]
		adv, skip, end, err := r.line(buf, pos, line)
		if err != nil {
			return Segment{}, err
		}
		if adv < 0 { // needs more bytes in view
			if err := r.grow(len(buf), pos); err != nil {
				return Segment{}, err
			}
			continue
		}
		if skip { // at pos 0, outside any message
			r.discard(adv)
			continue
		}
		pos += adv
		if end {
			return r.segment(pos, start, true), nil
		}
	}
}

// checkBulkTail checks the CRLF that ends a bulk payload, for the n bytes
// at pos of the r.bulk left.
func (r *Reader) checkBulkTail(buf []byte, pos int, n int64) error {
	if r.bulk-n >= 2 {
		return nil
	}
	for k := max(0, r.bulk-2); k < n; k++ {
		rem := r.bulk - k // 2: '\r' expected, 1: '\n'
		if want := "\r\n"[2-rem]; buf[pos+int(k)] != want {
			return r.fail(pos+int(k), ErrSyntax, "bulk string not terminated by CRLF (got %q)", buf[pos+int(k)])
		}
	}
	return nil
}

// line handles one line (ending in '\n') at buf[pos:]. It returns the bytes
// consumed (-1: more bytes needed in view), whether they are skipped
// (outside any message) and whether the message ended.
func (r *Reader) line(buf []byte, pos int, line []byte) (adv int, skip, end bool, err error) {
	if r.mode == Requests {
		return r.requestLine(buf, pos, line)
	}
	return r.replyLine(pos, line)
}

// content strips the CRLF of a RESP line.
func (r *Reader) content(pos int, line []byte) ([]byte, error) {
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, r.fail(pos+len(line)-1, ErrSyntax, "line not terminated by CRLF")
	}
	return line[:len(line)-2], nil
}

func (r *Reader) requestLine(buf []byte, pos int, line []byte) (int, bool, bool, error) {
	if !r.inMsg {
		if line[0] != '*' {
			return r.inline(pos, line)
		}
		c, err := r.content(pos, line)
		if err != nil {
			return 0, false, false, err
		}
		n, ok := parseInt(c[1:])
		switch {
		case !ok || n < -1:
			return 0, false, false, r.fail(pos, ErrSyntax, "invalid multibulk length %q", c[1:])
		case n <= 0: // Redis ignores it: no reply
			return len(line), true, false, nil
		case n > r.lim.MaxArray:
			return 0, false, false, r.fail(pos, ErrLimit, "multibulk length %d above %d", n, r.lim.MaxArray)
		}
		r.begin()
		r.stack = append(r.stack, frame{left: n})
		r.name = true
		r.cur.Wire += int64(len(line))
		return len(line), false, false, nil
	}
	c, err := r.content(pos, line)
	if err != nil {
		return 0, false, false, err
	}
	if len(c) == 0 || c[0] != '$' {
		return 0, false, false, r.fail(pos, ErrSyntax, "expected '$' in a request, got %q", c)
	}
	n, ok := parseInt(c[1:])
	if !ok || n < 0 {
		return 0, false, false, r.fail(pos, ErrSyntax, "invalid bulk length %q", c[1:])
	}
	if r.name {
		if n > int64(r.lim.MaxName) {
			return 0, false, false, r.fail(pos, ErrLimit, "command name of %d bytes, above %d", n, r.lim.MaxName)
		}
		total := len(line) + int(n) + 2
		if pos+total > len(buf) {
			return -1, false, false, nil
		}
		body := buf[pos+len(line) : pos+total]
		if body[n] != '\r' || body[n+1] != '\n' {
			return 0, false, false, r.fail(pos+len(line)+int(n), ErrSyntax, "bulk string not terminated by CRLF")
		}
		r.cur.Name = r.intern(body[:n])
		r.name = false
		r.cur.Wire += int64(total)
		end := r.complete()
		r.sub = !end && HasSubcommand(r.cur.Name)
		return total, false, end, nil
	}
	if r.sub {
		if n > int64(r.lim.MaxName) {
			return 0, false, false, r.fail(pos, ErrLimit, "subcommand of %d bytes, above %d", n, r.lim.MaxName)
		}
		total := len(line) + int(n) + 2
		if pos+total > len(buf) {
			if len(buf) >= r.size {
				return 0, false, false, r.headTooLong(pos)
			}
			return -1, false, false, nil
		}
		body := buf[pos+len(line) : pos+total]
		if body[n] != '\r' || body[n+1] != '\n' {
			return 0, false, false, r.fail(pos+len(line)+int(n), ErrSyntax, "bulk string not terminated by CRLF")
		}
		r.cur.Sub = r.intern(body[:n])
		r.sub = false
		r.cur.Size += n
		r.cur.Wire += int64(total)
		return total, false, r.complete(), nil
	}
	if n > maxLength || r.cur.Wire > maxLength {
		return 0, false, false, r.fail(pos, ErrLimit, "bulk length %d: request above %d bytes", n, int64(maxLength))
	}
	r.cur.Size += n
	r.cur.Wire += int64(len(line)) + n + 2
	r.bulk = n + 2
	return len(line), false, false, nil
}

// inline handles an inline command: the whole line is the request.
func (r *Reader) inline(pos int, line []byte) (int, bool, bool, error) {
	if len(line) > r.lim.MaxInline {
		return 0, false, false, r.fail(pos, ErrLimit, "inline command longer than %d bytes", r.lim.MaxInline)
	}
	c := bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})
	var name, sub []byte
	var size int64
	for f := range bytes.FieldsFuncSeq(c, isSpace) {
		switch {
		case name == nil:
			name = f
		case sub == nil:
			sub = f
			fallthrough
		default:
			size += int64(len(f))
		}
	}
	if name == nil { // empty line: Redis ignores it
		return len(line), true, false, nil
	}
	if len(name) > r.lim.MaxName {
		return 0, false, false, r.fail(pos, ErrLimit, "command name of %d bytes, above %d", len(name), r.lim.MaxName)
	}
	r.begin()
	r.cur.Name = r.intern(name)
	if sub != nil && HasSubcommand(r.cur.Name) {
		if len(sub) > r.lim.MaxName {
			return 0, false, false, r.fail(pos, ErrLimit, "subcommand of %d bytes, above %d", len(sub), r.lim.MaxName)
		}
		r.cur.Sub = r.intern(sub)
	}
	r.cur.Size = size
	r.cur.Wire = int64(len(line))
	return len(line), false, true, nil
}

func isSpace(c rune) bool { return c == ' ' || c == '\t' }

// HasSubcommand reports whether a command's first argument names a
// subcommand: Redis' container commands, by normalized name.
func HasSubcommand(name string) bool {
	switch name {
	case "acl", "client", "cluster", "command", "config", "debug", "function", "latency",
		"memory", "module", "object", "pubsub", "script", "slowlog", "xgroup", "xinfo":
		return true
	}
	return false
}

// headTooLong reports a request whose header, name and subcommand do not
// fit in the buffer together.
func (r *Reader) headTooLong(pos int) error {
	return r.fail(pos, ErrLimit, "request's command name and subcommand longer than the %d-byte buffer", r.size)
}

func (r *Reader) begin() {
	r.inMsg = true
	r.cur = Segment{}
	r.stack = r.stack[:0]
	r.sub = false
}

func (r *Reader) replyLine(pos int, line []byte) (int, bool, bool, error) {
	c, err := r.content(pos, line)
	if err != nil {
		return 0, false, false, err
	}
	if len(c) == 0 {
		return 0, false, false, r.fail(pos, ErrSyntax, "empty line where a type byte is expected")
	}
	if !r.inMsg {
		r.begin()
	}
	t, rest := c[0], c[1:]
	r.cur.Wire += int64(len(line))
	adv := len(line)
	switch t {
	case '+', '-':
		r.cur.Size += int64(len(rest))
	case ':':
		if _, ok := parseInt(rest); !ok {
			return 0, false, false, r.fail(pos, ErrSyntax, "invalid integer %q", rest)
		}
		r.cur.Size += int64(len(rest))
	case '_':
		if len(rest) != 0 {
			return 0, false, false, r.fail(pos, ErrSyntax, "null with content %q", rest)
		}
	case '#':
		if len(rest) != 1 || (rest[0] != 't' && rest[0] != 'f') {
			return 0, false, false, r.fail(pos, ErrSyntax, "invalid boolean %q", rest)
		}
		r.cur.Size++
	case ',':
		if !validDouble(rest) {
			return 0, false, false, r.fail(pos, ErrSyntax, "invalid double %q", rest)
		}
		r.cur.Size += int64(len(rest))
	case '(':
		if !validBigNumber(rest) {
			return 0, false, false, r.fail(pos, ErrSyntax, "invalid big number %q", rest)
		}
		r.cur.Size += int64(len(rest))
	case '$', '!', '=':
		if len(rest) == 1 && rest[0] == '?' {
			return 0, false, false, r.fail(pos, ErrUnsupported, "streamed string %q", c)
		}
		n, ok := parseInt(rest)
		if !ok || n < -1 || (n == -1 && t != '$') {
			return 0, false, false, r.fail(pos, ErrSyntax, "invalid length %q of %q", rest, t)
		}
		if n == -1 { // RESP2 null bulk string
			break
		}
		if n > maxLength || r.cur.Wire > maxLength {
			return 0, false, false, r.fail(pos, ErrLimit, "bulk length %d: reply above %d bytes", n, int64(maxLength))
		}
		if t == '=' && n < 4 {
			return 0, false, false, r.fail(pos, ErrSyntax, "verbatim string of %d bytes has no format", n)
		}
		r.cur.Size += n
		r.cur.Wire += n + 2
		r.bulk = n + 2
		return adv, false, false, nil
	case '*', '~', '>', '%', '|':
		if len(rest) == 1 && rest[0] == '?' {
			return 0, false, false, r.fail(pos, ErrUnsupported, "streamed aggregate %q", c)
		}
		n, ok := parseInt(rest)
		if !ok || n < -1 || (n == -1 && t != '*') {
			return 0, false, false, r.fail(pos, ErrSyntax, "invalid length %q of %q", rest, t)
		}
		if t == '>' && len(r.stack) == 0 {
			r.cur.Push = true
		}
		if n == -1 { // RESP2 null array
			break
		}
		if n > r.lim.MaxArray || ((t == '%' || t == '|') && 2*n > r.lim.MaxArray) {
			return 0, false, false, r.fail(pos, ErrLimit, "aggregate of %d elements above %d", n, r.lim.MaxArray)
		}
		if t == '%' || t == '|' {
			n *= 2
		}
		if n == 0 {
			if t == '|' { // an empty attribute annotates the next element
				return adv, false, false, nil
			}
			break
		}
		if len(r.stack) >= r.lim.MaxDepth {
			return 0, false, false, r.fail(pos, ErrLimit, "nesting deeper than %d", r.lim.MaxDepth)
		}
		r.stack = append(r.stack, frame{left: n, attr: t == '|'})
		return adv, false, false, nil
	default:
		return 0, false, false, r.fail(pos, ErrSyntax, "unknown type byte %q", t)
	}
	return adv, false, r.complete(), nil
}

// complete records the end of an element (not an attribute) and reports
// whether it ends the message.
func (r *Reader) complete() bool {
	for len(r.stack) > 0 {
		top := &r.stack[len(r.stack)-1]
		top.left--
		if top.left > 0 {
			return false
		}
		attr := top.attr
		r.stack = r.stack[:len(r.stack)-1]
		if attr {
			// The attribute is done; the element it annotates follows and
			// is the one that counts for the enclosing aggregate.
			return false
		}
	}
	return true
}

func (r *Reader) intern(b []byte) string {
	var low [defaultMaxName]byte
	var s []byte
	if len(b) <= len(low) {
		s = low[:len(b)]
	} else {
		s = make([]byte, len(b))
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		s[i] = c
	}
	if name, ok := r.names[string(s)]; ok {
		return name
	}
	name := string(s)
	if r.names == nil {
		r.names = make(map[string]string)
	}
	if len(r.names) < maxNames {
		r.names[name] = name
	}
	return name
}

// parseInt parses a RESP integer: an optional sign and decimal digits, no
// overflow.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	switch b[0] {
	case '-':
		neg, b = true, b[1:]
	case '+':
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > 1<<63-1 {
		return 0, false
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

func validDouble(b []byte) bool {
	switch string(b) {
	case "inf", "-inf", "nan", "+inf":
		return true
	}
	if len(b) == 0 || len(b) > 512 {
		return false
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+') {
			return false
		}
	}
	_, err := strconv.ParseFloat(string(b), 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}

func validBigNumber(b []byte) bool {
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		b = b[1:]
	}
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
