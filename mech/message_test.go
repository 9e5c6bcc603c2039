package mech

import (
	"encoding/json"
	"testing"
)

type testBody struct {
	Kind string `json:"kind"`
	N    int    `json:"n"`
}

func TestDecodeBody(t *testing.T) {
	raw := []byte(`{"kind":"k","n":7}`)
	tests := []struct {
		name string
		body any
		want int
		ok   bool
	}{
		{"value", testBody{Kind: "k", N: 1}, 1, true},
		{"pointer", &testBody{N: 2}, 2, true},
		{"nil pointer", (*testBody)(nil), 0, false},
		{"raw JSON", json.RawMessage(raw), 7, true},
		{"bytes", raw, 7, true},
		{"string", string(raw), 7, true},
		{"JSON of another kind", `{"kind":"other","n":7}`, 0, false},
		{"malformed JSON", `{"kind":"k",`, 0, false},
		{"JSON of the wrong shape", `{"kind":"k","n":"seven"}`, 0, false},
		{"another type", 42, 0, false},
	}
	for _, tc := range tests {
		got, ok := DecodeBody[testBody](tc.body, "k")
		if ok != tc.ok || got.N != tc.want {
			t.Errorf("%s: got %+v, %v; want n %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
