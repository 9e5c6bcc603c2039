package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// msg is a whole message as the segments of a Reader add up.
type msg struct {
	Name       string
	Push       bool
	Size, Wire int64
	Raw        string
}

// readAll reads every message from r with a buffer of size bytes; the
// bytes handed out must be contiguous in the stream.
func readAll(t testing.TB, r io.Reader, mode Mode, size int, lim Limits) ([]msg, error) {
	rd, err := NewReader(r, mode, size, lim)
	if err != nil {
		t.Fatal(err)
	}
	var out []msg
	var cur *msg
	for {
		seg, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if cur != nil {
					t.Fatalf("EOF inside a message")
				}
				return out, nil
			}
			return out, err
		}
		if seg.Start != (cur == nil) {
			t.Fatalf("segment at %d: Start=%v with message open=%v", seg.Offset, seg.Start, cur != nil)
		}
		if seg.Start {
			out = append(out, msg{})
			cur = &out[len(out)-1]
		}
		cur.Name, cur.Push, cur.Size, cur.Wire = seg.Name, seg.Push, seg.Size, seg.Wire
		cur.Raw += string(seg.Bytes)
		if seg.End {
			if int64(len(cur.Raw)) != cur.Wire {
				t.Fatalf("message %q: %d raw bytes, Wire %d", cur.Raw, len(cur.Raw), cur.Wire)
			}
			cur = nil
		}
	}
}

func req(parts ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(parts))
	for _, p := range parts {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(p), p)
	}
	return b.String()
}

func TestRequests(t *testing.T) {
	set := req("SET", "key", "value")
	get := req("get", "key")
	for _, tc := range []struct {
		name string
		in   string
		want []msg
	}{
		{"one", set, []msg{{Name: "set", Size: 8, Raw: set}}},
		{"pipelined", set + get + set, []msg{{Name: "set", Size: 8, Raw: set}, {Name: "get", Size: 3, Raw: get}, {Name: "set", Size: 8, Raw: set}}},
		{"two words stay one", req("CLIENT", "SETNAME", "x"), []msg{{Name: "client", Size: 8, Raw: req("CLIENT", "SETNAME", "x")}}},
		{"mixed case", req("GeT", "k"), []msg{{Name: "get", Size: 1, Raw: req("GeT", "k")}}},
		{"empty argument", req("SET", "k", ""), []msg{{Name: "set", Size: 1, Raw: req("SET", "k", "")}}},
		{"binary value", req("SET", "k", "a\r\nb\x00"), []msg{{Name: "set", Size: 6, Raw: req("SET", "k", "a\r\nb\x00")}}},
		{"inline", "PING\r\n", []msg{{Name: "ping", Raw: "PING\r\n"}}},
		{"inline LF only", "set  k   vv\n", []msg{{Name: "set", Size: 3, Raw: "set  k   vv\n"}}},
		{"empty lines and arrays skipped", "\r\n\n*0\r\n*-1\r\n  \r\n" + get, []msg{{Name: "get", Size: 3, Raw: get}}},
		{"inline then array", "PING\r\n" + get, []msg{{Name: "ping", Raw: "PING\r\n"}, {Name: "get", Size: 3, Raw: get}}},
		{"nothing", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.want {
				tc.want[i].Wire = int64(len(tc.want[i].Raw))
			}
			got, err := readAll(t, strings.NewReader(tc.in), Requests, 0, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestReplies(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string // one message each
		size []int64
		push []bool
	}{
		{"simple", []string{"+OK\r\n", "-ERR bad\r\n", ":-42\r\n", "_\r\n", "#t\r\n", ",3.14\r\n", ",inf\r\n", ",-inf\r\n", ",nan\r\n", "(-123456789012345678901234567890\r\n"},
			[]int64{2, 7, 3, 0, 1, 4, 3, 4, 3, 31}, nil},
		{"bulk", []string{"$5\r\nhello\r\n", "$0\r\n\r\n", "$-1\r\n", "!5\r\nERR x\r\n", "=8\r\ntxt:abcd\r\n"}, []int64{5, 0, 0, 5, 8}, nil},
		{"aggregates", []string{"*2\r\n$1\r\na\r\n:1\r\n", "*0\r\n", "*-1\r\n", "~1\r\n+x\r\n", "%1\r\n+k\r\n$1\r\nv\r\n", "%0\r\n"}, []int64{2, 0, 0, 1, 2, 0}, nil},
		{"nested", []string{"*2\r\n*2\r\n:1\r\n*1\r\n%1\r\n+a\r\n~0\r\n$2\r\nzz\r\n"}, []int64{4}, nil},
		{"attribute before a reply", []string{"|1\r\n+ttl\r\n:3\r\n$2\r\nhi\r\n", "|0\r\n+ok\r\n"}, []int64{6, 2}, nil},
		{"attribute inside an array", []string{"*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n"}, []int64{4}, nil},
		{"push between replies", []string{"+OK\r\n", ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nmsg\r\n", "+OK\r\n"}, []int64{2, 12, 2}, []bool{false, true, false}},
		{"push inside an array is not a push", []string{"*1\r\n>1\r\n+a\r\n"}, []int64{1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, strings.NewReader(strings.Join(tc.in, "")), Replies, 0, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.in) {
				t.Fatalf("%d messages %+v, want %d", len(got), got, len(tc.in))
			}
			for i, m := range got {
				if m.Raw != tc.in[i] || m.Size != tc.size[i] || (tc.push != nil && m.Push != tc.push[i]) {
					t.Errorf("message %d: %+v, want raw %q size %d", i, m, tc.in[i], tc.size[i])
				}
			}
		})
	}
}

// chunkReader returns its input in reads cut at the given offsets.
type chunkReader struct {
	data []byte
	cuts []int
	off  int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.off >= len(c.data) {
		return 0, io.EOF
	}
	end := len(c.data)
	for _, k := range c.cuts {
		if k > c.off {
			end = min(end, k)
			break
		}
	}
	n := copy(p, c.data[c.off:end])
	c.off += n
	return n, nil
}

// TestSplitEverywhere cuts a pipelined stream at every byte boundary (and
// into one-byte reads, and through small buffers): the messages must come
// out the same.
func TestSplitEverywhere(t *testing.T) {
	streams := []struct {
		mode Mode
		in   string
	}{
		{Requests, req("SET", "k", strings.Repeat("v", 300)) + "PING\r\n" + req("GET", "k") + "\r\n" + req("MSET", "a", "1", "b", strings.Repeat("x", 100))},
		{Replies, "+OK\r\n$300\r\n" + strings.Repeat("v", 300) + "\r\n>2\r\n+a\r\n+b\r\n*2\r\n|1\r\n+k\r\n+v\r\n%1\r\n:1\r\n,1.5\r\n_\r\n"},
	}
	for _, s := range streams {
		want, err := readAll(t, strings.NewReader(s.in), s.mode, 0, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for cut := 0; cut <= len(s.in); cut++ {
			got, err := readAll(t, &chunkReader{data: []byte(s.in), cuts: []int{cut}}, s.mode, 0, Limits{})
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s cut at %d: %v\ngot  %+v\nwant %+v", s.mode, cut, err, got, want)
			}
		}
		for _, size := range []int{64, 100, 257} {
			got, err := readAll(t, iotest.OneByteReader(strings.NewReader(s.in)), s.mode, size, Limits{})
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s one byte at a time, buffer %d: %v\ngot  %+v\nwant %+v", s.mode, size, err, got, want)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	small := Limits{MaxArray: 4, MaxDepth: 2, MaxName: 8, MaxInline: 32, MaxLine: 32}
	for _, tc := range []struct {
		name   string
		mode   Mode
		in     string
		offset int64
		want   error
	}{
		{"request not bulk", Requests, "*1\r\n:1\r\n", 4, ErrSyntax},
		{"bad multibulk length", Requests, "*x\r\n", 0, ErrSyntax},
		{"negative bulk", Requests, "*1\r\n$-1\r\n", 4, ErrSyntax},
		{"missing CR", Requests, "*1\n", 2, ErrSyntax},
		{"bulk without CRLF", Requests, "*2\r\n$3\r\nGET\r\n$1\r\nkXY", 18, ErrSyntax},
		{"name without CRLF", Requests, "*1\r\n$3\r\nGETxx", 11, ErrSyntax},
		{"too many arguments", Requests, "*5\r\n", 0, ErrLimit},
		{"name too long", Requests, "*1\r\n$9\r\nABCDEFGHI\r\n", 4, ErrLimit},
		{"inline too long", Requests, "GET " + strings.Repeat("k", 40), 0, ErrLimit},
		{"header line too long", Requests, "*1\r\n$" + strings.Repeat("1", 40), 4, ErrLimit},
		{"truncated", Requests, "*2\r\n$3\r\nGET\r\n$5\r\nab", 19, io.ErrUnexpectedEOF},
		{"truncated header", Requests, "*2", 2, io.ErrUnexpectedEOF},
		{"second message bad", Requests, req("GET", "k") + "*1\r\n+x\r\n", 24, ErrSyntax},
		{"unknown type", Replies, "+OK\r\n?x\r\n", 5, ErrSyntax},
		{"bad integer", Replies, ":12a\r\n", 0, ErrSyntax},
		{"integer overflow", Replies, ":99999999999999999999\r\n", 0, ErrSyntax},
		{"bad boolean", Replies, "#x\r\n", 0, ErrSyntax},
		{"bad double", Replies, ",1.2.3\r\n", 0, ErrSyntax},
		{"bad big number", Replies, "(12-3\r\n", 0, ErrSyntax},
		{"null with content", Replies, "_x\r\n", 0, ErrSyntax},
		{"null map", Replies, "%-1\r\n", 0, ErrSyntax},
		{"too deep", Replies, "*1\r\n*1\r\n*1\r\n:1\r\n", 8, ErrLimit},
		{"map too long", Replies, "%3\r\n", 0, ErrLimit},
		{"streamed string", Replies, "$?\r\n", 0, ErrUnsupported},
		{"streamed aggregate", Replies, "*?\r\n", 0, ErrUnsupported},
		{"short verbatim", Replies, "=2\r\nab\r\n", 0, ErrSyntax},
		{"empty line", Replies, "\r\n", 0, ErrSyntax},
		{"line too long", Replies, "+" + strings.Repeat("a", 40), 0, ErrLimit},
		{"huge bulk", Replies, "$9007199254740993\r\n", 0, ErrLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(t, strings.NewReader(tc.in), tc.mode, 64, small)
			var re *Error
			if !errors.As(err, &re) || !errors.Is(err, tc.want) || re.Offset != tc.offset {
				t.Fatalf("err = %v, want %v at offset %d", err, tc.want, tc.offset)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("at byte %d", tc.offset)) {
				t.Fatalf("error %q does not say where", err)
			}
		})
	}
}

// genReader generates a stream lazily: prefix, n bytes of filler, suffix.
type genReader struct {
	prefix, suffix []byte
	n, off         int64
	read           int64
}

func (g *genReader) Read(p []byte) (int, error) {
	total := int64(len(g.prefix)) + g.n + int64(len(g.suffix))
	if g.off >= total {
		return 0, io.EOF
	}
	k := 0
	for k < len(p) && g.off < total {
		switch {
		case g.off < int64(len(g.prefix)):
			c := copy(p[k:], g.prefix[g.off:])
			k += c
			g.off += int64(c)
		case g.off < int64(len(g.prefix))+g.n:
			c := int(min(int64(len(p)-k), int64(len(g.prefix))+g.n-g.off))
			for i := range c {
				p[k+i] = 'v'
			}
			k += c
			g.off += int64(c)
		default:
			c := copy(p[k:], g.suffix[g.off-int64(len(g.prefix))-g.n:])
			k += c
			g.off += int64(c)
		}
	}
	g.read += int64(k)
	return k, nil
}

// TestHugeBulkBoundedMemory streams a 256 MiB value through a Reader into a
// writer that discards it: every byte comes out, the request is declared
// whole by its first segment, and the Reader allocates a small constant
// amount, nowhere near the value's size.
func TestHugeBulkBoundedMemory(t *testing.T) {
	const n = 256 << 20
	for _, mode := range []Mode{Requests, Replies} {
		var prefix string
		if mode == Requests {
			prefix = fmt.Sprintf("*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$%d\r\n", n)
		} else {
			prefix = fmt.Sprintf("$%d\r\n", n)
		}
		g := &genReader{prefix: []byte(prefix), suffix: []byte("\r\n+OK\r\n"), n: n}
		total := int64(len(prefix)) + n + 7
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		rd, err := NewReader(g, mode, 0, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		var out int64
		segs, msgs := 0, 0
		for {
			seg, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			if segs == 0 && seg.Wire != int64(len(prefix))+n+2 {
				t.Fatalf("%s: first segment declares %d wire bytes, want %d", mode, seg.Wire, int64(len(prefix))+n+2)
			}
			n, _ := io.Discard.Write(seg.Bytes)
			out += int64(n)
			segs++
			if seg.End {
				msgs++
			}
			if len(seg.Bytes) > DefaultBufferSize {
				t.Fatalf("segment of %d bytes", len(seg.Bytes))
			}
		}
		runtime.ReadMemStats(&after)
		if mode == Replies && msgs != 2 || mode == Requests && msgs != 2 {
			// The request stream ends with "+OK\r\n", an inline command.
			t.Fatalf("%s: %d messages, want 2", mode, msgs)
		}
		if out != total || g.read != total {
			t.Fatalf("%s: forwarded %d, read %d, want %d", mode, out, g.read, total)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d MiB in %d segments, %d bytes allocated", mode, n>>20, segs, alloc)
		if alloc > 4*DefaultBufferSize {
			t.Fatalf("%s: allocated %d bytes for a %d-byte value: not bounded", mode, alloc, n)
		}
	}
}

func TestNewReaderArguments(t *testing.T) {
	if _, err := NewReader(bytes.NewReader(nil), Requests, 10, Limits{}); err == nil {
		t.Fatal("a 10-byte buffer was accepted")
	}
	if _, err := NewReader(bytes.NewReader(nil), Mode(7), 0, Limits{}); err == nil {
		t.Fatal("an unknown mode was accepted")
	}
	rd, _ := NewReader(bytes.NewReader(nil), Requests, 100, Limits{MaxLine: 1000, MaxName: 1000})
	if l := rd.Limits(); l.MaxLine != 100 || l.MaxName != 52 || l.MaxDepth != defaultMaxDepth {
		t.Fatalf("limits %+v not capped by the buffer", l)
	}
}

// TestSubcommand: a container command's first argument is read, normalized,
// before the request's first Segment is handed out; other commands' are
// not; a subcommand is bounded like a name.
func TestSubcommand(t *testing.T) {
	long := strings.Repeat("r", 9)
	for _, tc := range []struct {
		name      string
		in        string
		size      int
		wantName  string
		wantSub   string
		wantErr   error
		errOffset int64
	}{
		{"array", req("CLIENT", "REPLY", "OFF"), 0, "client", "reply", nil, 0},
		{"mixed case", req("cLiEnT", "Reply", "SKIP"), 0, "client", "reply", nil, 0},
		{"no argument", req("CLIENT"), 0, "client", "", nil, 0},
		{"subcommand last", req("CONFIG", "GET"), 0, "config", "get", nil, 0},
		{"inline", "client  REPLY off\r\n", 0, "client", "reply", nil, 0},
		{"inline without argument", "CLIENT\r\n", 0, "client", "", nil, 0},
		{"not a container", req("GET", "Key"), 0, "get", "", nil, 0},
		{"inline not a container", "get Key\r\n", 0, "get", "", nil, 0},
		{"subcommand too long", req("CLIENT", long), 0, "", "", ErrLimit, 16},
		{"inline subcommand too long", "CLIENT " + long + "\r\n", 0, "", "", ErrLimit, 0},
		{"head beyond the buffer", "*0000000000000000002\r\n$0000000000000000006\r\nCLIENT\r\n$0000000000000000008\r\n" + long[:8] + "\r\n", 64, "", "", ErrLimit, 52},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				var r io.Reader = strings.NewReader(tc.in)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				rd, err := NewReader(r, Requests, tc.size, Limits{MaxName: 8})
				if err != nil {
					t.Fatal(err)
				}
				seg, err := rd.Next()
				if tc.wantErr != nil {
					var re *Error
					if !errors.Is(err, tc.wantErr) || !errors.As(err, &re) || re.Offset != tc.errOffset {
						t.Fatalf("one byte %v: %v, want %v at byte %d", oneByte, err, tc.wantErr, tc.errOffset)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if !seg.Start || seg.Name != tc.wantName || seg.Sub != tc.wantSub {
					t.Fatalf("one byte %v: first segment start %v name %q sub %q, want %q %q", oneByte, seg.Start, seg.Name, seg.Sub, tc.wantName, tc.wantSub)
				}
				for !seg.End {
					if seg, err = rd.Next(); err != nil {
						t.Fatal(err)
					}
					if seg.Sub != tc.wantSub {
						t.Fatalf("later segment sub %q", seg.Sub)
					}
				}
				if want := int64(len(tc.in)); seg.Wire != want {
					t.Fatalf("wire %d, want %d", seg.Wire, want)
				}
			}
		})
	}
	// The subcommand counts in the request's size like any argument.
	got, err := readAll(t, strings.NewReader(req("CLIENT", "SETNAME", "x")), Requests, 0, Limits{})
	if err != nil || len(got) != 1 || got[0].Size != 8 {
		t.Fatalf("CLIENT SETNAME x: %+v %v, want size 8", got, err)
	}
}
