package httpfs

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestRangeLength(t *testing.T) {
	for h, want := range map[string]int64{
		"bytes=0-9": 10, " bytes=5-5 ": 1, "bytes=10-": -1, "bytes=-10": -1, "bytes=0-1,4-5": -1,
		"bytes=9-0": -1, "items=0-9": -1, "": -1, "bytes=a-b": -1,
	} {
		if got := RangeLength(h); got != want {
			t.Errorf("RangeLength(%q) = %d, want %d", h, got, want)
		}
	}
}

// TestRoundTrip reads pipelined requests (by length, chunked with a
// trailer, none) and writes them again: the bytes that come out parse to
// the same requests, and sizes are counted.
func TestRoundTrip(t *testing.T) {
	in := "PUT /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello" +
		"PUT /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: v\r\n\r\n" +
		"GET /c HTTP/1.1\r\nHost: h\r\nRange: bytes=0-99\r\n\r\n"
	// A one-byte buffer for the copies: bodies stream in small pieces.
	r := NewReader(strings.NewReader(in), 4096, Limits{})
	var out bytes.Buffer
	type seen struct {
		typ           string
		payload, wire int64
		expected      int64
	}
	var got []seen
	for !r.AtEOF() {
		req, err := r.ReadRequest()
		if err != nil {
			t.Fatal(err)
		}
		n, err := WriteRequestHead(&out, req)
		if err != nil {
			t.Fatal(err)
		}
		payload, wire, err := CopyBody(&out, req.Body, Chunked(req.TransferEncoding), &req.Trailer, make([]byte, 1))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, seen{Type(req), payload, n + wire, Expected(req)})
	}
	if len(got) != 3 || got[0].typ != "put" || got[0].payload != 5 || got[1].payload != 5 || got[2].payload != 0 || got[2].expected != 100 || got[0].expected != -1 {
		t.Fatalf("got %+v", got)
	}
	if int64(out.Len()) != got[0].wire+got[1].wire+got[2].wire {
		t.Fatalf("wrote %d bytes, counted %d", out.Len(), got[0].wire+got[1].wire+got[2].wire)
	}
	// What was written reads back as the same requests.
	r2 := NewReader(&out, 4096, Limits{})
	for i, want := range []string{"hello", "abcde", ""} {
		req, err := r2.ReadRequest()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(req.Body)
		if string(b) != want || req.Host != "h" {
			t.Fatalf("request %d: body %q host %q", i, b, req.Host)
		}
		if i == 1 && req.Trailer.Get("X-T") != "v" {
			t.Fatalf("trailer lost: %v", req.Trailer)
		}
	}
}

func TestHeaderLimit(t *testing.T) {
	in := "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + strings.Repeat("x", 20000) + "\r\n\r\n"
	r := NewReader(strings.NewReader(in), 4096, Limits{MaxHeaderBytes: 8192})
	if _, err := r.ReadRequest(); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("err = %v, want ErrHeaderTooLarge", err)
	}
	r = NewReader(strings.NewReader(in), 4096, Limits{MaxHeaderBytes: 32768})
	if _, err := r.ReadRequest(); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
}

func TestResponseHead(t *testing.T) {
	in := "HTTP/1.1 206 Partial Content\r\nContent-Length: 3\r\nContent-Range: bytes 0-2/10\r\n\r\nabc"
	r := NewReader(strings.NewReader(in), 4096, Limits{})
	resp, err := r.ReadResponse(http.MethodGet)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteResponseHead(&out, resp)
	CopyBody(&out, resp.Body, false, nil, make([]byte, 2))
	back, err := http.ReadResponse(bufioReader(&out), nil)
	if err != nil || back.StatusCode != 206 || back.ContentLength != 3 || back.Header.Get("Content-Range") != "bytes 0-2/10" {
		t.Fatalf("%v %+v", err, back)
	}
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }
