package client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestCapacityEstimatesSendsToken: the controller's /metrics needs the
// operator's credentials off loopback, so CapacityEstimates sends the
// token as every other request does.
func TestCapacityEstimatesSendsToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "# TYPE bulkhead_controller_appliance_capacity_estimate gauge")
		fmt.Fprintln(w, `bulkhead_controller_appliance_capacity_estimate{appliance="kv"} 1234`)
	}))
	defer srv.Close()
	for _, c := range []struct {
		token string
		ok    bool
	}{{"s3cret", true}, {"", false}} {
		cl, err := New(srv.URL, Options{Token: c.token})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cl.CapacityEstimates(context.Background())
		if c.ok && (err != nil || got["kv"] != 1234) {
			t.Errorf("token %q: estimates %v, %v; want kv 1234", c.token, got, err)
		}
		if !c.ok && err == nil {
			t.Errorf("token %q: no error from a 401", c.token)
		}
	}
}
