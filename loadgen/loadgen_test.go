package loadgen

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/units"
)

// need fails (never skips) when a server binary is missing: CI installs
// them (Debian: redis-server, nginx).
func need(t *testing.T, bin string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real servers: skipped in -short mode")
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s not found (apt-get install redis-server nginx): %v", bin, err)
	}
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitListen(t *testing.T, addr string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s", addr)
}

func startRedis(t *testing.T) netip.AddrPort {
	bin := need(t, "redis-server")
	dir := t.TempDir()
	port := freePort(t)
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	a := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	waitListen(t, a.String())
	return a
}

func startNginx(t *testing.T) netip.AddrPort {
	bin := need(t, "nginx")
	dir := t.TempDir()
	for _, d := range []string{"root", "tmp", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	conf := fmt.Sprintf(`master_process off; daemon off; pid %[1]s/nginx.pid; error_log %[1]s/logs/error.log warn;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path %[1]s/tmp; keepalive_requests 1000000;
  server { listen 127.0.0.1:%[2]d; root %[1]s/root; client_max_body_size 0; dav_methods PUT; create_full_put_path on; } }
`, dir, port)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", filepath.Join(dir, "nginx.conf"), "-p", dir, "-e", filepath.Join(dir, "logs", "error.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	a := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	waitListen(t, a.String())
	return a
}

func dialer(a netip.AddrPort) func(ctx context.Context) (net.Conn, error) {
	return DialFrom(netip.MustParseAddr("127.0.0.1"), a, func(f func() error) error { return f() })
}

func mix(entries ...string) []model.RequestType {
	var out []model.RequestType
	for _, e := range entries {
		var typ string
		var size int
		var frac float64
		fmt.Sscanf(strings.ReplaceAll(e, ":", " "), "%s %d %g", &typ, &size, &frac)
		out = append(out, model.RequestType{Type: typ, Size: units.Bytes(size), Fraction: frac})
	}
	return out
}

func TestOps(t *testing.T) {
	kv := &model.Appliance{Name: "kv", Model: model.ModelKV}
	fs := &model.Appliance{Name: "fs", Model: model.ModelFilestore}
	ops, err := Ops(kv, model.ProtoRedis, mix("get:8000:0.6", "put:64000:0.4"))
	if err != nil {
		t.Fatal(err)
	}
	// Fig. 6(b): 8K tokens up to 8 KB, then a token per byte
	if !ops[0].Read || ops[1].Read || ops[0].Tokens != 8000 || ops[1].Tokens != 64000 {
		t.Errorf("kv ops: %+v", ops)
	}
	ops, err = Ops(fs, model.ProtoHTTP, mix("read:512:0.2", "write:512:0.4", "cwrite:512:0.4"))
	if err != nil {
		t.Fatal(err)
	}
	if !ops[0].Read || ops[1].Read || ops[1].Compressible || !ops[2].Compressible {
		t.Errorf("filestore ops: %+v", ops)
	}
	for _, c := range []struct {
		a     *model.Appliance
		proto string
		m     []model.RequestType
		want  string
	}{
		{kv, model.ProtoRedis, mix("read:10:1"), `type "read" has no Redis operation`},
		{fs, model.ProtoHTTP, mix("get:10:1"), `type "get" has no HTTP file-store operation`},
		{fs, model.ProtoHTTP, mix("aes:10:1"), `type "aes"`},
		{kv, "grpc", mix("get:10:1"), `protocol "grpc"`},
		{kv, model.ProtoRedis, mix("get:0:1"), "size 0 bytes"},
	} {
		if _, err := Ops(c.a, c.proto, c.m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Ops(%s, %s, %v) = %v, want an error with %q", c.a.Name, c.proto, c.m, err, c.want)
		}
	}
}

// TestDrawMatchesFractions: types are drawn by fraction, the same for the
// same seed.
func TestDrawMatchesFractions(t *testing.T) {
	kv := &model.Appliance{Name: "kv", Model: model.ModelKV}
	ops, _ := Ops(kv, model.ProtoRedis, mix("get:100:0.61", "put:100:0.39"))
	f, err := New(Config{Name: "x", Protocol: model.ProtoRedis, Ops: ops, Outstanding: 1, Dial: dialer(netip.AddrPort{})})
	if err != nil {
		t.Fatal(err)
	}
	seq := func(seed uint64) []int {
		rng := rand.New(rand.NewPCG(seed, 0))
		out := make([]int, 20000)
		for i := range out {
			out[i] = f.draw(rng)
		}
		return out
	}
	a, b := seq(7), seq(7)
	gets := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("the same seed drew different types")
		}
		if a[i] == 0 {
			gets++
		}
	}
	if share := float64(gets) / float64(len(a)); math.Abs(share-0.61) > 0.015 {
		t.Errorf("gets are %.3f of the requests, want 0.61", share)
	}
}

func runFor(t *testing.T, f *Flow, d time.Duration) {
	t.Helper()
	if err := f.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := f.Run(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

// TestRedis: closed and open loop against a real redis-server, every
// request answered, the mix kept.
func TestRedis(t *testing.T) {
	a := startRedis(t)
	kv := &model.Appliance{Name: "kv", Model: model.ModelKV}
	ops, err := Ops(kv, model.ProtoRedis, mix("get:8000:0.5", "put:8000:0.5"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Name: "T/v1->kv", Protocol: model.ProtoRedis, Ops: ops, Outstanding: 4, Dial: dialer(a), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	runFor(t, f, 500*time.Millisecond)
	n := f.Completed()
	req, tok := f.Totals()
	t.Logf("closed loop, 4 outstanding: %d requests in 0.5 s (%v), %.0f tokens, %d failed", req, n, tok, f.Failed())
	if req < 1000 || f.Failed() != 0 || tok != float64(req)*8000 {
		t.Errorf("closed loop: %d requests, %d failed, %.0f tokens", req, f.Failed(), tok)
	}
	if share := float64(n[0]) / float64(req); math.Abs(share-0.5) > 0.1 {
		t.Errorf("gets are %.2f of the requests, want 0.5", share)
	}
	o, err := New(Config{Name: "T/v2->kv", Protocol: model.ProtoRedis, Ops: ops, Rate: 2000, Dial: dialer(a), Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	runFor(t, o, time.Second)
	req, _ = o.Totals()
	t.Logf("open loop at 2000/s: %d requests in 1 s, %d failed, %d dropped", req, o.Failed(), o.Dropped())
	if math.Abs(float64(req)-2000) > 300 || o.Failed() != 0 || o.Dropped() != 0 {
		t.Errorf("open loop at 2000/s: %d requests in 1 s, %d failed, %d dropped", req, o.Failed(), o.Dropped())
	}
}

// TestNginx: reads, writes and compressible writes against a real nginx
// with WebDAV PUT.
func TestNginx(t *testing.T) {
	a := startNginx(t)
	fs := &model.Appliance{Name: "fs", Model: model.ModelFilestore}
	ops, err := Ops(fs, model.ProtoHTTP, mix("read:64000:0.5", "write:64000:0.25", "cwrite:512:0.25"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Name: "T/v1->fs", Protocol: model.ProtoHTTP, Ops: ops, Outstanding: 4, Dial: dialer(a), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	runFor(t, f, 500*time.Millisecond)
	n := f.Completed()
	req, tok := f.Totals()
	t.Logf("closed loop, 4 outstanding: %d requests in 0.5 s (%v), %.0f tokens, %d failed", req, n, tok, f.Failed())
	if req < 200 || f.Failed() != 0 || n[0] == 0 || n[1] == 0 || n[2] == 0 {
		t.Errorf("closed loop: %d requests (%v), %d failed", req, n, f.Failed())
	}
	if want := float64(n[0]+n[1])*64000 + float64(n[2])*8000; tok != want {
		t.Errorf("tokens %.0f, want %.0f", tok, want)
	}
}

// TestUnreachable: a flow whose appliance does not answer ends with an
// error that says so.
func TestUnreachable(t *testing.T) {
	kv := &model.Appliance{Name: "kv", Model: model.ModelKV}
	ops, _ := Ops(kv, model.ProtoRedis, mix("put:100:1"))
	a := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(freePort(t)))
	f, err := New(Config{Name: "x", Protocol: model.ProtoRedis, Ops: ops, Outstanding: 1, Dial: dialer(a)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.Run(ctx, 0); err == nil || !strings.Contains(err.Error(), "failures in a row") {
		t.Fatalf("Run against nothing: %v", err)
	}
}
