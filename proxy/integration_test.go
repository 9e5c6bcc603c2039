package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/proxy/appliancetest"

	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

// TestRedisBenchmarkRate runs redis-benchmark through the proxy with the
// appliance allocated X tokens/s: it measures X/8000 requests/s (every GET
// costs 8000 tokens, Fig. 6(b)), and so does the proxy's Collect.
func TestRedisBenchmarkRate(t *testing.T) {
	bench := appliancetest.Need(t, "redis-benchmark", "redis-tools")
	app := Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(appliancetest.StartRedis(t))}
	const reqRate = 400.0 // requests/s
	// A 50 ms burst: the bucket's initial depth hardly counts in the run.
	p := newProxy(t, Config{Buckets: []tokenbucket.Option{tokenbucket.WithBurst(50 * time.Millisecond)}}, app)
	f := kvFlow("vm1")
	if err := p.SetAllocation(f.ID, []float64{Unlimited, reqRate * 8000, Unlimited}); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(listen(t, p, f))
	const n = 1000
	p.Collect()
	start := time.Now()
	out, err := exec.Command(bench, "-h", "127.0.0.1", "-p", port, "-t", "get", "-n", strconv.Itoa(n), "-c", "4", "-P", "4", "--csv").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	elapsed := time.Since(start)
	obs := p.Collect()
	// "GET","<rps>",...
	var rps float64
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Split(line, ","); len(f) > 1 && strings.Trim(f[0], `"`) == "GET" {
			rps, _ = strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
		}
	}
	measured := float64(n) / elapsed.Seconds()
	used := obs.Flows[0].Used[1] / 8000
	t.Logf("allocated %v req/s: redis-benchmark reports %.1f req/s, wall clock %.1f req/s, Collect %.1f req/s", reqRate, rps, measured, used)
	for what, x := range map[string]float64{"redis-benchmark": rps, "Collect": used} {
		if math.Abs(x-reqRate) > 0.1*reqRate {
			t.Errorf("%s: %.1f requests/s at an allocation of %v", what, x, reqRate)
		}
	}
}

// TestRedisCliPipe sends 50000 pipelined commands with redis-cli --pipe:
// every reply must match (redis-cli counts them and checks its final
// ECHO), and the proxy's appliance statistics count them all.
func TestRedisCliPipe(t *testing.T) {
	cli := appliancetest.Need(t, "redis-cli", "redis-tools")
	app := Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(appliancetest.StartRedis(t))}
	p := newProxy(t, Config{}, app)
	_, port, _ := net.SplitHostPort(listen(t, p, kvFlow("vm1")))
	var in bytes.Buffer
	const n = 50000
	for i := range n {
		if i%2 == 0 {
			in.WriteString(encode("SET", fmt.Sprintf("key:%d", i), strings.Repeat("v", i%200)))
		} else {
			in.WriteString(encode("INCR", "counter"))
		}
	}
	cmd := exec.Command(cli, "-h", "127.0.0.1", "-p", port, "--pipe")
	cmd.Stdin = &in
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --pipe: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("errors: 0, replies: %d", n)) {
		t.Fatalf("redis-cli --pipe: %s", out)
	}
	obs := p.Collect()
	if got := obs.Appliances[0].Completed; got != n+1 { // + redis-cli's closing ECHO
		t.Fatalf("%d requests answered, want %d", got, n+1)
	}
}

// httpFlow is a flow to the file store.
func httpFlow(src string) Flow {
	return Flow{ID: mech.FlowID{Src: src, Dst: "fs"}, Tenant: "t", Path: []mech.PathElem{
		{Resource: 0, Role: mech.Forward}, {Resource: 3, Role: mech.Appliance}, {Resource: 1, Role: mech.Reverse}}}
}

// TestNginxFileStore relays PUT (by length and chunked), GET (whole and a
// range), HEAD and DELETE to a real nginx, keep-alive and pipelined, and
// checks what each element is charged.
func TestNginxFileStore(t *testing.T) {
	clock := tokenbucket.NewFakeClock(t0) // stands still: statistics are exact
	p := newProxy(t, Config{Clock: clock}, Appliance{Name: "fs", Protocol: HTTP, Dial: tcpDial(appliancetest.StartNginx(t))})
	addr := listen(t, p, httpFlow("vm1"))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	base := "http://" + addr

	big := bytes.Repeat([]byte("0123456789"), 2<<20) // 20 MB
	do := func(method, path string, body io.Reader, length int64, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	if r, _ := do("PUT", "/d/big", bytes.NewReader(big), int64(len(big))); r.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %s", r.Status)
	}
	// Chunked: a body of unknown length.
	if r, _ := do("PUT", "/d/chunked", io.MultiReader(strings.NewReader("hello "), strings.NewReader("world")), -1); r.StatusCode/100 != 2 {
		t.Fatalf("chunked PUT: %s", r.Status)
	}
	r, b := do("GET", "/d/big", nil, 0)
	if r.StatusCode != 200 || sha256.Sum256(b) != sha256.Sum256(big) {
		t.Fatalf("GET: %s, %d bytes", r.Status, len(b))
	}
	if r, b := do("GET", "/d/chunked", nil, 0); string(b) != "hello world" {
		t.Fatalf("GET chunked-put file: %s %q", r.Status, b)
	}
	if r, b := do("GET", "/d/big", nil, 0, "Range", "bytes=10-19"); r.StatusCode != http.StatusPartialContent || string(b) != "0123456789" {
		t.Fatalf("GET range: %s %q", r.Status, b)
	}
	if r, b := do("HEAD", "/d/big", nil, 0); r.StatusCode != 200 || len(b) != 0 || r.ContentLength != int64(len(big)) {
		t.Fatalf("HEAD: %s %d", r.Status, r.ContentLength)
	}
	if r, _ := do("DELETE", "/d/chunked", nil, 0); r.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s", r.Status)
	}
	clock.Advance(time.Second) // Used is per second of the period
	obs := p.Collect()
	fo := obs.Flows[0]
	const n = 7
	if got := obs.Appliances[0].Completed; got != n {
		t.Fatalf("%d answered, want %d", got, n)
	}
	// Appliance: Fig. 6(b) of each request's payload (request body plus
	// response body): PUT 20 MB, PUT 11, GET 20 MB, GET 11, GET 10, HEAD,
	// DELETE.
	wantApp := 2*float64(len(big)) + 5*8000
	if fo.Used[1] != wantApp {
		t.Errorf("appliance used %v, want %v", fo.Used[1], wantApp)
	}
	if fo.Used[0] < float64(len(big)) || fo.Used[0] > float64(len(big))+8000 {
		t.Errorf("forward link used %v, want the PUT bodies plus heads", fo.Used[0])
	}
	if fo.Used[2] < float64(len(big)) || fo.Used[2] > float64(len(big))+8000 {
		t.Errorf("reverse link used %v, want the GET bodies plus heads", fo.Used[2])
	}

	// Pipelined on one connection: three requests in one write.
	c := dialT(t, addr)
	write(t, c, "GET /d/big HTTP/1.1\r\nHost: x\r\nRange: bytes=0-4\r\n\r\n"+
		"HEAD /d/big HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	br := bufio.NewReader(c)
	for i, want := range []int{206, 200, 404} {
		method := "GET"
		if i == 1 {
			method = "HEAD"
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("pipelined response %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want || (i == 0 && string(b) != "01234") {
			t.Fatalf("pipelined response %d: %s %q", i, resp.Status, b)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection not closed after Connection: close: %v", err)
	}
	// A malformed request gets a 400.
	c = dialT(t, addr)
	write(t, c, "GET / HTTP/1.1\r\nHost x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("malformed request: %v %v", resp, err)
	}
}

// TestNginxRangeCharge: a ranged GET is charged its range before it is
// sent, so at a tight allocation it waits for those tokens.
func TestNginxRangeCharge(t *testing.T) {
	clock := tokenbucket.NewFakeClock(t0)
	p := newProxy(t, Config{Clock: clock}, Appliance{Name: "fs", Protocol: HTTP, Dial: tcpDial(appliancetest.StartNginx(t))})
	f := httpFlow("vm1")
	addr := listen(t, p, f)
	c := dialT(t, addr)
	write(t, c, "PUT /f HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("z", 100000))
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 201 {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	// Reverse link at 50000 bytes/s (depth 50000): a 60000-byte range is
	// over the depth, so it passes only once the bucket is full, into
	// debt; the next range then waits for the debt to be repaid.
	if err := p.SetAllocation(f.ID, []float64{Unlimited, Unlimited, 50000}); err != nil {
		t.Fatal(err)
	}
	get := "GET /f HTTP/1.1\r\nHost: x\r\nRange: bytes=0-59999\r\n\r\n"
	write(t, c, get+get)
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil || resp.StatusCode != 206 {
		t.Fatalf("first range: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err == nil {
			io.Copy(io.Discard, resp.Body)
		}
	}()
	select {
	case <-done:
		t.Fatal("the second range passed with the reverse bucket in debt")
	case <-time.After(100 * time.Millisecond):
	}
	// The debt (60000 + heads - 50000) and the next 60000 need about 1.4 s
	// of refill.
	for i := 0; i < 300; i++ {
		clock.Advance(10 * time.Millisecond)
		select {
		case <-done:
			obs := p.Collect()
			waited := time.Duration(i+1) * 10 * time.Millisecond
			t.Logf("second range released after %v of refill; reverse used %.0f bytes/s", waited, obs.Flows[0].Used[2])
			if waited < time.Second {
				t.Fatalf("released after %v, before the debt and the range were refilled", waited)
			}
			return
		default:
			time.Sleep(time.Millisecond)
		}
	}
	t.Fatal("the second range never passed")
}
