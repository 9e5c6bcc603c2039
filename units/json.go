package units

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// decodeJSON reads a JSON string with parseString or a JSON number with
// parseNumber (given the number as written) into *dst, left as it is on
// error or for null (as encoding/json does for other types).
func decodeJSON[T any](data []byte, dst *T, parseString, parseNumber func(string) (T, error)) error {
	var v T
	var err error
	switch {
	case string(data) == "null":
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		if err = json.Unmarshal(data, &s); err != nil {
			return err
		}
		v, err = parseString(s)
	default:
		v, err = parseNumber(string(data))
	}
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// UnmarshalJSON reads a rate as a string with units ("450Mbps") or a
// number of bits/s.
func (r *Rate) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, (*float64)(r), ParseRate, ParseRate)
}

// MarshalJSON writes the rate as a number of bits/s.
func (r Rate) MarshalJSON() ([]byte, error) { return json.Marshal(float64(r)) }

// UnmarshalJSON reads a size as a string with units ("64KB") or a number
// of bytes.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, (*float64)(b), ParseBytes, ParseBytes)
}

// MarshalJSON writes the size as a number of bytes.
func (b Bytes) MarshalJSON() ([]byte, error) { return json.Marshal(float64(b)) }

// UnmarshalJSON reads tokens as a string with units ("1600MT/s") or a
// number.
func (t *Tokens) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, (*float64)(t), ParseTokens, ParseTokens)
}

// MarshalJSON writes the amount as a number of tokens.
func (t Tokens) MarshalJSON() ([]byte, error) { return json.Marshal(float64(t)) }

// UnmarshalJSON reads a duration as a Go duration string ("30s") or a
// whole number of nanoseconds (the unit of time.Duration, and what
// encoding/json writes for one).
func (d *Duration) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, (*time.Duration)(d), ParseDuration, parseNanoseconds)
}

// MarshalJSON writes the duration as a number of nanoseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, int64(d), 10), nil
}

// parseNanoseconds parses a JSON number of nanoseconds: whole and not
// negative ("1e9" is a second).
func parseNanoseconds(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("invalid duration %s: negative", s)
		}
		return time.Duration(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || f != math.Trunc(f) || f >= math.MaxInt64:
		return 0, fmt.Errorf("invalid duration %s: want a whole number of nanoseconds or a string such as \"30s\" or \"1ms\"", s)
	case f < 0:
		return 0, fmt.Errorf("invalid duration %s: negative", s)
	}
	return time.Duration(f), nil
}
