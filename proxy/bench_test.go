package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bulkhead-dc/bulkhead/proxy/appliancetest"
)

// BenchmarkRedis compares a client talking to a real Redis directly and
// through the proxy (one flow, unlimited), side by side in one run:
// round trip of one small GET at a time, and pipelined GETs (64 per write).
// ns/op is per request.
func BenchmarkRedis(b *testing.B) {
	redis := appliancetest.StartRedis(b)
	p := newProxy(b, Config{}, Appliance{Name: "kv", Protocol: RESP, Dial: tcpDial(redis)})
	proxied := listen(b, p, kvFlow("vm1"))
	get := encode("GET", "k")
	for _, depth := range []int{1, 64} {
		batch := strings.Repeat(get, depth)
		for _, target := range []struct{ name, addr string }{{"direct", redis}, {"proxy", proxied}} {
			b.Run(fmt.Sprintf("%s/pipeline=%d", target.name, depth), func(b *testing.B) {
				c := dialT(b, target.addr)
				write(b, c, encode("SET", "k", strings.Repeat("v", 100)))
				rr := newReplyReader(b, c)
				if _, err := rr.next(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i += depth {
					write(b, c, batch)
					for range depth {
						if _, err := rr.next(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
