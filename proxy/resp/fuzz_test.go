package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// fuzzOne checks what must hold for any input: no panic; the segments are
// contiguous and are the input (less skipped empty requests); an error says
// where, within the input; and a small buffer fed one byte at a time frames
// the same messages as a large one.
func fuzzOne(t *testing.T, mode Mode, data []byte) {
	var lim Limits // defaults, capped by each buffer
	frame := func(r io.Reader, size int) (msgs []string, consumed int64, err error) {
		rd, e := NewReader(r, mode, size, lim)
		if e != nil {
			t.Fatal(e)
		}
		var cur []byte
		next := int64(0)
		for {
			seg, e := rd.Next()
			if e != nil {
				if !errors.Is(e, io.EOF) {
					var re *Error
					if !errors.As(e, &re) {
						t.Fatalf("error %v is not an *Error", e)
					}
					if re.Offset < 0 || re.Offset > int64(len(data)) {
						t.Fatalf("error offset %d outside the input of %d bytes", re.Offset, len(data))
					}
					err = fmt.Errorf("%v at %d", re.Err, re.Offset)
				}
				return msgs, next, err
			}
			if seg.Offset < next || seg.Offset+int64(len(seg.Bytes)) > int64(len(data)) {
				t.Fatalf("segment at %d+%d after %d, input %d", seg.Offset, len(seg.Bytes), next, len(data))
			}
			if !bytes.Equal(seg.Bytes, data[seg.Offset:seg.Offset+int64(len(seg.Bytes))]) {
				t.Fatalf("segment at %d is not the input's bytes", seg.Offset)
			}
			if !seg.Start && seg.Offset != next {
				t.Fatalf("segment at %d skips bytes inside a message (next %d)", seg.Offset, next)
			}
			next = seg.Offset + int64(len(seg.Bytes))
			cur = append(cur, seg.Bytes...)
			if seg.End {
				if int64(len(cur)) != seg.Wire {
					t.Fatalf("message of %d bytes declares %d", len(cur), seg.Wire)
				}
				msgs = append(msgs, fmt.Sprintf("%s|%s|%v|%d|%q", seg.Name, seg.Sub, seg.Push, seg.Size, cur))
				cur = nil
			}
		}
	}
	big, _, errBig := frame(bytes.NewReader(data), 4096)
	small, _, errSmall := frame(iotest.OneByteReader(bytes.NewReader(data)), 512)
	if len(data) < 400 { // within both buffers' limits, both must agree
		if fmt.Sprint(big) != fmt.Sprint(small) || fmt.Sprint(errBig) != fmt.Sprint(errSmall) {
			t.Fatalf("buffers disagree:\n4096: %q %v\n512:  %q %v", big, errBig, small, errSmall)
		}
	}
}

func FuzzRequests(f *testing.F) {
	for _, s := range []string{
		req("SET", "k", "v"), req("GET", "k") + req("DEL", "k"), "PING\r\n", "\r\n*0\r\n", "*1\r\n$-1\r\n",
		"*2\r\n$3\r\nGET\r\n$5\r\nab", "set k v\n", req("CLIENT", "REPLY", "OFF"), "client reply skip\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOne(t, Requests, data) })
}

func FuzzReplies(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "$5\r\nhello\r\n", "*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n", ">2\r\n+a\r\n+b\r\n",
		"%1\r\n+k\r\n~1\r\n,1.5\r\n", "=8\r\ntxt:abcd\r\n", "!3\r\nERR\r\n", "(123\r\n#t\r\n_\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOne(t, Replies, data) })
}
