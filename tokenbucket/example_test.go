package tokenbucket_test

import (
	"fmt"
	"time"

	"github.com/bulkhead-dc/bulkhead/tokenbucket"
)

// A flow allocated ⟨800, 5000⟩ tokens/s switches to 4 KB READs costing
// ⟨80, 4000⟩ (Pulsar §4.4): the multi-resource bucket lets one through per
// 800 ms and reports the backlog the controller sees as demand.
func ExampleMulti() {
	clock := tokenbucket.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := tokenbucket.NewMulti(clock, []float64{800, 5000})
	if err != nil {
		panic(err)
	}
	m.Offer(tokenbucket.Request{Cost: []float64{800, 5000}}) // use up the buckets
	m.Stats()                                                // and start a new period
	for i := range 10 {
		m.Offer(tokenbucket.Request{Cost: []float64{80, 4000}, ID: uint64(i)})
	}
	var released []tokenbucket.Request
	for range 100 { // one second of 10 ms refills
		clock.Advance(10 * time.Millisecond)
		released = m.Release(released)
	}
	st := m.Stats()
	fmt.Println("released:", len(released), "queued:", m.Queued())
	fmt.Println("used:", st.Used, "backlog:", st.Backlog)
	d, _ := m.NextRelease()
	fmt.Println("next release in", d)
	// Output:
	// released: 1 queued: 9
	// used: [80 4000] backlog: [720 36000]
	// next release in 600ms
}
