package mech

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Body is the body of a control message: a named, versioned type.
// MessageKind names the type and its version ("elasticswitch.guarantees.v1");
// a change of a body's meaning or fields gets a new version. Every body a
// mechanism sends implements Body; EncodeBody and DecodeBody are its one
// codec.
//
// On the wire a body is a JSON object whose "kind" member is its
// MessageKind, followed by its fields. Bodies implement json.Marshaler
// with MarshalBody so that any JSON encoder writes them that way.
type Body interface {
	MessageKind() string
}

// MarshalBody encodes v, a body's fields (a type without its own
// MarshalJSON, to end the recursion), as a JSON object with "kind" first.
func MarshalBody[T any](kind string, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("message body %s: %w", kind, err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("message body %s: fields encode to %.20q, not a JSON object", kind, b)
	}
	k, err := json.Marshal(kind)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+len(k)+9)
	out = append(out, `{"kind":`...)
	out = append(out, k...)
	if len(bytes.TrimSpace(b[1:len(b)-1])) > 0 {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// EncodeBody encodes a message body for the wire.
func EncodeBody(b Body) ([]byte, error) {
	out, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("message body %s: %w", b.MessageKind(), err)
	}
	var k struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(out, &k) != nil || k.Kind != b.MessageKind() {
		return nil, fmt.Errorf("message body %s: encodes without its kind (implement MarshalJSON with MarshalBody)", b.MessageKind())
	}
	return out, nil
}

// DecodeBody returns a message body as a T if it is one: a T or *T (as the
// simulator delivers Go values), or its encoding (json.RawMessage, []byte
// or string, as a host agent delivers what it read from the wire) whose
// "kind" is T's MessageKind. Mechanisms decode their messages with it.
func DecodeBody[T Body](body any) (T, bool) {
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
		return decodeJSON[T](b)
	case []byte:
		return decodeJSON[T](b)
	case string:
		return decodeJSON[T]([]byte(b))
	}
	return zero, false
}

func decodeJSON[T Body](data []byte) (T, bool) {
	var zero T
	var k struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &k) != nil || k.Kind != zero.MessageKind() {
		return zero, false
	}
	var v T
	if json.Unmarshal(data, &v) != nil {
		return zero, false
	}
	return v, true
}
