package proxy

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/proxy/appliancetest"
)

// TestHostileClients: while one client streams a 512 MB bulk string,
// another pipelines GETs of a 1 MB value and never reads a reply, and a
// third sends malformed RESP, a well-behaved client's 2,000 pipelined
// INCRs are all answered, in order; the malformed one gets an error and
// its connection closed; and the whole process allocates a bounded
// amount, nowhere near the bytes the hostile clients pushed.
func TestHostileClients(t *testing.T) {
	app := Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(appliancetest.StartRedis(t))}
	p := newProxy(t, Config{}, app)
	addr := func(vm string) string { return listen(t, p, kvFlow(vm)) }
	// Prepare the 1 MB value.
	setup := dialT(t, addr("setup"))
	write(t, setup, encode("SET", "mb", strings.Repeat("m", 1<<20)))
	if r, err := newReplyReader(t, setup).next(); err != nil || r != "+OK\r\n" {
		t.Fatalf("SET mb: %q %v", r, err)
	}

	var before, after runtimeMem
	before.read()
	var wg sync.WaitGroup
	// 1. A 512 MB bulk string, streamed.
	const big = 512 << 20
	bigDone := make(chan string, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := dialT(t, addr("big"))
		w := bufio.NewWriterSize(c, 64<<10)
		fmt.Fprintf(w, "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n", big)
		chunk := []byte(strings.Repeat("0123456789abcdef", 4096))
		for left := big; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				bigDone <- "write: " + err.Error()
				return
			}
		}
		w.WriteString("\r\n")
		w.Flush()
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		r, err := newReplyReader(t, c).next()
		if err != nil {
			bigDone <- "reply: " + err.Error()
			return
		}
		bigDone <- r
	}()
	// 2. GETs of 1 MB, never read: 1 GB of replies asked for.
	lazy := dialT(t, addr("lazy"))
	wg.Add(1)
	go func() {
		defer wg.Done()
		lazy.SetWriteDeadline(time.Now().Add(3 * time.Second))
		for range 1024 {
			if _, err := io.WriteString(lazy, encode("GET", "mb")); err != nil {
				return // pushed back: the proxy stopped reading
			}
		}
	}()
	// 3. Malformed RESP.
	bad := dialT(t, addr("bad"))
	write(t, bad, encode("PING")+"*2\r\n$3\r\nGET\r\n$-7\r\n")
	bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	all, err := io.ReadAll(bad)
	if err != nil {
		t.Fatalf("malformed client: %v", err)
	}
	if !strings.HasPrefix(string(all), "+PONG\r\n-ERR bulkhead proxy: resp requests: at byte") {
		t.Errorf("malformed client got %q, want its PONG then an error naming the byte", all)
	}
	// 4. A well-behaved client, meanwhile.
	good := dialT(t, addr("good"))
	var req strings.Builder
	const n = 2000
	for range n {
		req.WriteString(encode("INCR", "counter"))
	}
	go io.WriteString(good, req.String())
	rr := newReplyReader(t, good)
	good.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := 1; i <= n; i++ {
		r, err := rr.next()
		if err != nil || r != fmt.Sprintf(":%d\r\n", i) {
			t.Fatalf("INCR %d: %q %v (lost or reordered)", i, r, err)
		}
	}
	if r := <-bigDone; r != "+OK\r\n" {
		t.Fatalf("the 512 MB SET: %q", r)
	}
	wg.Wait()
	after.read()
	alloc := after.total - before.total
	t.Logf("512 MB streamed in, 1 GB of replies asked for and not read: %d KiB allocated by the whole test process", alloc>>10)
	if alloc > 64<<20 {
		t.Errorf("allocated %d MiB: the proxy's memory is not bounded by its buffers", alloc>>20)
	}
}
