// Package httpfs frames HTTP/1.1 traffic to a file store (GET, PUT, HEAD,
// DELETE; any other method passes the same way) for a proxy that relays it
// message by message: requests and responses are parsed with net/http's
// ReadRequest and ReadResponse, their heads written again as they came
// (status or request line, then the header fields), and their bodies
// streamed through a fixed buffer, never held whole — by Content-Length,
// chunked (re-chunked on the way out, trailers kept) or, for a response,
// delimited by the connection's close.
//
// A Reader bounds what a head may take (Limits.MaxHeaderBytes) by limiting
// the bytes it pulls from the connection while it reads one.
//
// Sizes: a request's Type is its method in lower case ("get", "put"); the
// payload that counts for its cost is the bytes of its body plus the bytes
// of its response's body. Before the response is seen the proxy knows the
// request body's Content-Length, and for a GET with a single closed byte
// range ("Range: bytes=a-b") the response body's expected length
// (Expected). Everything else is only known once it has passed.
package httpfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
)

// DefaultMaxHeaderBytes is the default bound on a request's or response's
// head (request or status line and header fields).
const DefaultMaxHeaderBytes = 64 << 10

// Limits bound what a Reader accepts.
type Limits struct {
	// MaxHeaderBytes bounds a head (default DefaultMaxHeaderBytes).
	MaxHeaderBytes int
}

// ErrHeaderTooLarge reports a head longer than Limits.MaxHeaderBytes.
var ErrHeaderTooLarge = errors.New("httpfs: header too large")

// limitReader returns EOF once remain bytes have been read.
type limitReader struct {
	r      io.Reader
	remain int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.remain <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.remain {
		p = p[:l.remain]
	}
	n, err := l.r.Read(p)
	l.remain -= int64(n)
	return n, err
}

// Reader reads HTTP/1.1 messages from one direction of a connection.
type Reader struct {
	lr   limitReader
	br   *bufio.Reader
	size int
	lim  Limits
}

// NewReader returns a Reader of r with a buffer of size bytes (0: 64 KiB).
func NewReader(r io.Reader, size int, lim Limits) *Reader {
	if size <= 0 {
		size = 64 << 10
	}
	if lim.MaxHeaderBytes <= 0 {
		lim.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	rd := &Reader{lr: limitReader{r: r, remain: math.MaxInt64}, size: size, lim: lim}
	rd.br = bufio.NewReaderSize(&rd.lr, size)
	return rd
}

// Buffered returns the bytes read from the connection and not yet consumed.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// head runs read with the connection limited to a head's worth of bytes
// (plus the buffer's read-ahead), and maps hitting the limit to
// ErrHeaderTooLarge.
func (r *Reader) head(read func() error) error {
	r.lr.remain = int64(r.lim.MaxHeaderBytes) + int64(r.size)
	err := read()
	hit := r.lr.remain <= 0
	r.lr.remain = math.MaxInt64
	if err != nil && hit {
		return fmt.Errorf("%w (more than %d bytes)", ErrHeaderTooLarge, r.lim.MaxHeaderBytes)
	}
	return err
}

// AtEOF reports whether the connection has ended cleanly before another
// message: nothing buffered and the next read returns io.EOF. It blocks
// until a byte or the end arrives.
func (r *Reader) AtEOF() bool {
	_, err := r.br.Peek(1)
	return errors.Is(err, io.EOF)
}

// ReadRequest reads the next request's head; its Body streams from the
// connection and must be read to its end before the next ReadRequest.
func (r *Reader) ReadRequest() (*http.Request, error) {
	var req *http.Request
	err := r.head(func() (err error) {
		req, err = http.ReadRequest(r.br)
		return err
	})
	if err != nil {
		return nil, err
	}
	if req.ProtoMajor != 1 {
		return nil, fmt.Errorf("httpfs: %s not supported", req.Proto)
	}
	return req, nil
}

// ReadResponse reads the next response's head, the answer to a request of
// the given method (HEAD responses have no body). Its Body streams from the
// connection and must be read to its end before the next ReadResponse.
func (r *Reader) ReadResponse(method string) (*http.Response, error) {
	var resp *http.Response
	err := r.head(func() (err error) {
		resp, err = http.ReadResponse(r.br, &http.Request{Method: method})
		return err
	})
	return resp, err
}

// Type returns a request's type: its method in lower case.
func Type(req *http.Request) string { return strings.ToLower(req.Method) }

// Chunked reports whether a message's body is chunked.
func Chunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

// Expected returns the bytes a GET's response body is expected to carry
// when the request names one closed byte range ("bytes=a-b"), else -1.
func Expected(req *http.Request) int64 {
	if req.Method != http.MethodGet {
		return -1
	}
	return RangeLength(req.Header.Get("Range"))
}

// RangeLength returns the length of a Range header of one closed byte range
// ("bytes=a-b", a <= b: b-a+1), else -1 (no header, several ranges, an open
// or suffix range, or invalid syntax).
func RangeLength(h string) int64 {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return -1
	}
	a, b, ok := strings.Cut(spec, "-")
	if !ok {
		return -1
	}
	first, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	last, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if err1 != nil || err2 != nil || first < 0 || last < first || last == math.MaxInt64 {
		return -1
	}
	return last - first + 1
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteRequestHead writes a request's line and header fields as they came
// (Host first; Transfer-Encoding: chunked for a chunked body) and returns
// the bytes written.
func WriteRequestHead(w io.Writer, req *http.Request) (int64, error) {
	cw := &countWriter{w: w}
	if _, err := fmt.Fprintf(cw, "%s %s %s\r\n", req.Method, req.RequestURI, req.Proto); err != nil {
		return cw.n, err
	}
	if req.Host != "" && req.Header.Get("Host") == "" {
		if _, err := fmt.Fprintf(cw, "Host: %s\r\n", req.Host); err != nil {
			return cw.n, err
		}
	}
	return cw.n, finishHead(cw, req.Header, req.TransferEncoding)
}

// WriteResponseHead writes a response's status line and header fields as
// they came and returns the bytes written.
func WriteResponseHead(w io.Writer, resp *http.Response) (int64, error) {
	cw := &countWriter{w: w}
	if _, err := fmt.Fprintf(cw, "%s %s\r\n", resp.Proto, resp.Status); err != nil {
		return cw.n, err
	}
	return cw.n, finishHead(cw, resp.Header, resp.TransferEncoding)
}

func finishHead(cw *countWriter, h http.Header, te []string) error {
	if err := h.Write(cw); err != nil {
		return err
	}
	if Chunked(te) {
		if _, err := io.WriteString(cw, "Transfer-Encoding: chunked\r\n"); err != nil {
			return err
		}
	}
	_, err := io.WriteString(cw, "\r\n")
	return err
}

// onlyWriter and onlyReader hide ReaderFrom and WriterTo so that io.CopyBuffer
// uses the caller's buffer (a TCP connection's ReadFrom would allocate its
// own).
type onlyWriter struct{ io.Writer }
type onlyReader struct{ io.Reader }

// CopyBody streams a body to w through buf: as it is, or re-chunked when
// chunked (then trailers, read from *trailer once the body has ended, follow
// the last chunk). It returns the body's bytes (payload) and the bytes
// written (wire). If before is not nil, CopyBody calls it before it writes
// each part of the body — every buffer read from body, as a chunk when
// chunked, then the last chunk with the trailers — with the payload and
// wire bytes the body will have once the part is written; an error from it
// stops the copy. A caller that charges what it forwards waits there, so
// that a body whose length is not declared is paced as it streams.
func CopyBody(w io.Writer, body io.Reader, chunked bool, trailer *http.Header, buf []byte, before func(payload, wire int64) error) (payload, wire int64, err error) {
	cw := &countWriter{w: w}
	var dst io.Writer = cw
	var ch io.WriteCloser
	if chunked {
		ch = httputil.NewChunkedWriter(cw)
		dst = ch
	}
	if before != nil {
		dst = &beforeWriter{w: dst, wire: cw, chunked: chunked, before: before}
	}
	payload, err = io.CopyBuffer(onlyWriter{dst}, onlyReader{body}, buf)
	if err != nil || !chunked {
		return payload, cw.n, err
	}
	if before != nil {
		tail := int64(len("0\r\n\r\n"))
		if trailer != nil && len(*trailer) > 0 {
			n := &countWriter{w: io.Discard}
			trailer.Write(n) // to io.Discard: cannot fail
			tail += n.n
		}
		if err := before(payload, cw.n+tail); err != nil {
			return payload, cw.n, err
		}
	}
	if err := ch.Close(); err != nil { // the last chunk, "0\r\n"
		return payload, cw.n, err
	}
	if trailer != nil && len(*trailer) > 0 {
		if err := trailer.Write(cw); err != nil {
			return payload, cw.n, err
		}
	}
	_, err = io.WriteString(cw, "\r\n")
	return payload, cw.n, err
}

// beforeWriter calls before with the payload and wire bytes each write
// brings the body to, then writes: wire counts what reaches the
// connection, a chunk's header and CRLF included when chunked
// (httputil's chunked writer writes "%x\r\n", the data, "\r\n").
type beforeWriter struct {
	w       io.Writer
	wire    *countWriter
	chunked bool
	before  func(payload, wire int64) error
	payload int64
}

func (b *beforeWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	wire := int64(len(p))
	if b.chunked {
		wire += int64(len(strconv.FormatInt(int64(len(p)), 16))) + 4
	}
	if err := b.before(b.payload+int64(len(p)), b.wire.n+wire); err != nil {
		return 0, err
	}
	n, err := b.w.Write(p)
	b.payload += int64(n)
	return n, err
}
