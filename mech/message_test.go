package mech

import (
	"encoding/json"
	"testing"
)

type testBody struct {
	N int `json:"n"`
}

func (testBody) MessageKind() string { return "test.body.v1" }

func (b testBody) MarshalJSON() ([]byte, error) {
	type fields testBody
	return MarshalBody(b.MessageKind(), fields(b))
}

type emptyBody struct{}

func (emptyBody) MessageKind() string { return "test.empty.v1" }
func (b emptyBody) MarshalJSON() ([]byte, error) {
	type fields emptyBody
	return MarshalBody(b.MessageKind(), fields(b))
}

type kindless struct{ N int }

func (kindless) MessageKind() string { return "test.kindless.v1" }

func TestDecodeBody(t *testing.T) {
	raw := []byte(`{"kind":"test.body.v1","n":7}`)
	tests := []struct {
		name string
		body any
		want int
		ok   bool
	}{
		{"value", testBody{N: 1}, 1, true},
		{"pointer", &testBody{N: 2}, 2, true},
		{"nil pointer", (*testBody)(nil), 0, false},
		{"raw JSON", json.RawMessage(raw), 7, true},
		{"bytes", raw, 7, true},
		{"string", string(raw), 7, true},
		{"JSON of another kind", `{"kind":"other","n":7}`, 0, false},
		{"JSON of another version", `{"kind":"test.body.v2","n":7}`, 0, false},
		{"malformed JSON", `{"kind":"test.body.v1",`, 0, false},
		{"JSON of the wrong shape", `{"kind":"test.body.v1","n":"seven"}`, 0, false},
		{"another type", 42, 0, false},
	}
	for _, tc := range tests {
		got, ok := DecodeBody[testBody](tc.body)
		if ok != tc.ok || got.N != tc.want {
			t.Errorf("%s: got %+v, %v; want n %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestEncodeBody(t *testing.T) {
	tests := []struct {
		name string
		body Body
		want string
		err  bool
	}{
		{"fields", testBody{N: 3}, `{"kind":"test.body.v1","n":3}`, false},
		{"no fields", emptyBody{}, `{"kind":"test.empty.v1"}`, false},
		{"no MarshalJSON", kindless{N: 1}, "", true},
	}
	for _, tc := range tests {
		got, err := EncodeBody(tc.body)
		if (err != nil) != tc.err || string(got) != tc.want {
			t.Errorf("%s: %s, %v; want %s (error %v)", tc.name, got, err, tc.want, tc.err)
		}
		if err == nil {
			if back, ok := DecodeBody[testBody](got); tc.name == "fields" && (!ok || back.N != 3) {
				t.Errorf("%s: round trip gave %+v, %v", tc.name, back, ok)
			}
		}
	}
}
