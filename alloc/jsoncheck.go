package alloc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxJSONBytes bounds the input of SolveJSON (and so of `bulkhead alloc`):
// 16 MiB, about 250,000 rate flows of two links each. Decoding and solving
// take about 16 bytes of memory per input byte (16.6 MB of such flows:
// 271 MB peak RSS, 2.0 s), so the bound keeps a problem under about 300 MB;
// larger input is refused before it is decoded, having read at most
// MaxJSONBytes+1 bytes.
const MaxJSONBytes = 16 << 20

// readBounded reads all of r, refusing more than limit bytes without
// reading past limit+1.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	var data []byte
	var err error
	if size := sizeHint(r); size > 0 {
		// A regular file: one buffer of its size (and room to see EOF or
		// one byte too many) instead of io.ReadAll's growing copies.
		var b bytes.Buffer
		b.Grow(int(min(size, limit)) + bytes.MinRead)
		_, err = b.ReadFrom(io.LimitReader(r, limit+1))
		data = b.Bytes()
	} else {
		data, err = io.ReadAll(io.LimitReader(r, limit+1))
	}
	if err != nil {
		return nil, &pathError{msg: "read input: " + err.Error(), err: err}
	}
	if int64(len(data)) > limit {
		return nil, perr("", "input larger than %d bytes (the limit of alloc input, MaxJSONBytes); split the problem", limit)
	}
	return data, nil
}

// sizeHint is the size of r when it is a regular file (a file argument,
// or stdin redirected from one), else 0.
func sizeHint(r io.Reader) int64 {
	f, ok := r.(interface{ Stat() (fs.FileInfo, error) })
	if !ok {
		return 0
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}

// checkJSON walks the tokens of data and refuses what encoding/json would
// accept silently: an object with the same key twice (encoding/json keeps
// the last) and strings that are not valid Unicode — invalid UTF-8 bytes or
// unpaired surrogate escapes, which encoding/json rewrites to U+FFFD, so
// that ids in the answer would no longer match the question. Errors name
// the JSON path of the offending key or value. Syntax errors are left to
// the decoder that follows (the walk stops at the first).
func checkJSON(data []byte) error {
	type frame struct {
		array bool
		index int             // arrays: index of the next element
		key   string          // objects: the current key
		isKey bool            // objects: the next string token is a key
		seen  map[string]bool // objects: keys so far
	}
	var stack []*frame
	path := func(leaf string) string {
		var b []byte
		for _, f := range stack {
			if f.array {
				b = append(b, '[')
				b = strconv.AppendInt(b, int64(f.index), 10)
				b = append(b, ']')
				continue
			}
			if f.isKey {
				continue // between keys: no current key
			}
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, f.key...)
		}
		if leaf != "" {
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, leaf...)
		}
		return string(b)
	}
	// value is called after a complete value (scalar or closed container)
	// inside the top frame.
	value := func() {
		if n := len(stack); n > 0 {
			if f := stack[n-1]; f.array {
				f.index++
			} else {
				f.isKey = true
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder reports
		}
		end := dec.InputOffset()
		start := prev
		prev = end
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{isKey: true, seen: map[string]bool{}})
			case '[':
				stack = append(stack, &frame{array: true})
			default:
				stack = stack[:len(stack)-1]
				value()
			}
		case string:
			raw := data[start:end]
			if i := bytes.IndexByte(raw, '"'); i >= 0 {
				raw = raw[i:]
			}
			top := (*frame)(nil)
			if n := len(stack); n > 0 {
				top = stack[n-1]
			}
			if top != nil && !top.array && top.isKey {
				if msg := badString(raw); msg != "" {
					return perr(path(""), "key %s: %s", raw, msg)
				}
				if top.seen[t] {
					return perr(path(t), "duplicate key %q (each key may appear once)", t)
				}
				top.seen[t] = true
				top.key = t
				top.isKey = false
				continue
			}
			if msg := badString(raw); msg != "" {
				return perr(path(""), "%s", msg)
			}
			value()
		default:
			value()
		}
	}
}

// badString says what is wrong with a JSON string literal (with its
// quotes) that is syntactically valid: invalid UTF-8 or an unpaired
// surrogate escape. "" if nothing.
func badString(lit []byte) string {
	if len(lit) < 2 {
		return ""
	}
	s := lit[1 : len(lit)-1]
	for i := 0; i < len(s); {
		c := s[i]
		if c == '\\' {
			if i+1 < len(s) && s[i+1] == 'u' {
				r, ok := hex4(s[i+2:])
				if !ok {
					return "" // syntax: the decoder reports it
				}
				switch {
				case utf16.IsSurrogate(r) && r < 0xdc00:
					if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
						if r2, ok := hex4(s[i+8:]); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
							i += 12
							continue
						}
					}
					return fmt.Sprintf("unpaired surrogate escape \\u%04x at byte %d of the string (not valid Unicode)", r, i)
				case utf16.IsSurrogate(r):
					return fmt.Sprintf("unpaired surrogate escape \\u%04x at byte %d of the string (not valid Unicode)", r, i)
				}
				i += 6
				continue
			}
			i += 2
			continue
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Sprintf("invalid UTF-8 (byte 0x%02x at byte %d of the string)", c, i)
		}
		i += size
	}
	return ""
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}
