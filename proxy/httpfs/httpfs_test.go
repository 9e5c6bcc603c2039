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
		payload, wire, err := CopyBody(&out, req.Body, Chunked(req.TransferEncoding), &req.Trailer, make([]byte, 1), nil)
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
	CopyBody(&out, resp.Body, false, nil, make([]byte, 2), nil)
	back, err := http.ReadResponse(bufioReader(&out), nil)
	if err != nil || back.StatusCode != 206 || back.ContentLength != 3 || back.Header.Get("Content-Range") != "bytes 0-2/10" {
		t.Fatalf("%v %+v", err, back)
	}
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// TestCopyBodyBefore: before is told, ahead of every write, exactly the
// payload and wire bytes the body will have once it is done — chunk
// headers, the last chunk and the trailers included — and its error stops
// the copy before the write.
func TestCopyBodyBefore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		chunked bool
		body    string
		trailer http.Header
		buf     int
	}{
		{"plain", false, strings.Repeat("p", 1000), nil, 64},
		{"chunked", true, strings.Repeat("c", 1000), nil, 64},
		{"chunked, odd buffer", true, strings.Repeat("c", 70000), nil, 4099},
		{"chunked with trailers", true, "hello", http.Header{"X-Sum": {"abc"}, "X-N": {"1"}}, 2},
		{"chunked, empty", true, "", nil, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			var calls int
			var last [2]int64
			before := func(payload, wire int64) error {
				if int64(out.Len()) != last[1] || payload < last[0] || wire <= last[1] {
					t.Fatalf("call %d (%d, %d): %d bytes written, the previous call announced %d", calls, payload, wire, out.Len(), last[1])
				}
				calls++
				last = [2]int64{payload, wire}
				return nil
			}
			tr := tc.trailer
			payload, wire, err := CopyBody(&out, strings.NewReader(tc.body), tc.chunked, &tr, make([]byte, tc.buf), before)
			if err != nil {
				t.Fatal(err)
			}
			if payload != int64(len(tc.body)) || wire != int64(out.Len()) || last != [2]int64{payload, wire} {
				t.Fatalf("copied %d payload, %d wire (%d written); last announced %v", payload, wire, out.Len(), last)
			}
			if want := (len(tc.body) + tc.buf - 1) / tc.buf; tc.chunked && calls != want+1 || !tc.chunked && calls != want {
				t.Errorf("%d calls for %d bytes through %d", calls, len(tc.body), tc.buf)
			}
			if tc.chunked { // it reads back
				req, err := http.ReadRequest(bufio.NewReader(io.MultiReader(strings.NewReader("PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"), &out)))
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(req.Body)
				if err != nil || string(b) != tc.body || req.Trailer.Get("X-Sum") != tc.trailer.Get("X-Sum") {
					t.Fatalf("read back %d bytes, %v, trailer %v", len(b), err, req.Trailer)
				}
			}
		})
	}
	// Its error stops the copy before the write.
	stop := errors.New("stop")
	var out bytes.Buffer
	n := 0
	_, _, err := CopyBody(&out, strings.NewReader(strings.Repeat("x", 100)), true, nil, make([]byte, 10), func(payload, wire int64) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || out.Len() != 2*len("a\r\n0123456789\r\n") {
		t.Fatalf("err %v, %d bytes written, want stop after two chunks", err, out.Len())
	}
}
