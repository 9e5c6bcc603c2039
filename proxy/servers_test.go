package proxy

import (
	"context"
	"net"
	"runtime"
	"testing"
)

// tcpDial dials addr.
func tcpDial(addr string) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// listen serves p on a loopback listener for flow f until the test ends;
// it returns the listener's address.
func listen(t testing.TB, p *Proxy, f Flow) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Listen(ctx, ln, func(net.Conn) (Flow, error) { return f, nil })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String()
}

// runtimeMem is the process's cumulative allocation.
type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	runtime.GC()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.total = s.TotalAlloc
}
