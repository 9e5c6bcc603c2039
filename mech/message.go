package mech

import "encoding/json"

// DecodeBody returns a message body as a T if it is one: a T or *T (as the simulator
// delivers Go values), or JSON (json.RawMessage, []byte or string, as a
// host agent delivers what it read from the wire) whose "kind" field
// is kind. Mechanisms decode their messages with it.
func DecodeBody[T any](body any, kind string) (T, bool) {
	var zero T
	switch b := body.(type) {
	case T:
		return b, true
	case *T:
		if b == nil {
			return zero, false
		}
		return *b, true
	case json.RawMessage:
		return decodeJSON[T](b, kind)
	case []byte:
		return decodeJSON[T](b, kind)
	case string:
		return decodeJSON[T]([]byte(b), kind)
	}
	return zero, false
}

func decodeJSON[T any](data []byte, kind string) (T, bool) {
	var zero T
	var k struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &k) != nil || k.Kind != kind {
		return zero, false
	}
	var v T
	if json.Unmarshal(data, &v) != nil {
		return zero, false
	}
	return v, true
}
