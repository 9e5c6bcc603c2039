package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/internal/etcdtest"
)

func TestOpenEtcdErrors(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	// A prefix holding another layout.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := OpenEtcd(ctx, EtcdConfig{Endpoints: c.Endpoints(), Prefix: "/other/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.Put(ctx, "/other/_meta", "something-else-v9"); err != nil {
		t.Fatal(err)
	}
	_ = e.Close()
	cases := []struct {
		name string
		cfg  EtcdConfig
		want string // in the error
		is   error  // the error wraps it, if not nil
	}{
		{"no endpoints", EtcdConfig{}, "no endpoints", nil},
		{"prefix without a slash", EtcdConfig{Endpoints: c.Endpoints(), Prefix: "/bulkhead"}, "must end with '/'", nil},
		{"negative TTL", EtcdConfig{Endpoints: c.Endpoints(), SessionTTL: -time.Second}, "negative session TTL", nil},
		{"nobody listens", EtcdConfig{Endpoints: []string{"http://127.0.0.1:1"}}, "127.0.0.1:1", context.DeadlineExceeded},
		{"another layout", EtcdConfig{Endpoints: c.Endpoints(), Prefix: "/other/"}, `layout "something-else-v9"`, nil},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			e, err := OpenEtcd(ctx, tc.cfg)
			if err == nil {
				_ = e.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %v", err, tc.is)
			}
		})
	}
}
