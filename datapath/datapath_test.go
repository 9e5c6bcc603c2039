package datapath

import (
	"net/netip"
	"slices"
	"testing"
)

func TestSortedPairs(t *testing.T) {
	ip := netip.MustParseAddr
	m := map[Pair]int{
		{Src: ip("10.0.0.2"), Dst: ip("10.0.0.1")}: 0,
		{Src: ip("10.0.0.1"), Dst: ip("10.0.0.9")}: 0,
		{Src: ip("10.0.0.1"), Dst: ip("10.0.0.3")}: 0,
	}
	var got []string
	for _, p := range SortedPairs(m) {
		got = append(got, p.String())
	}
	want := []string{"10.0.0.1->10.0.0.3", "10.0.0.1->10.0.0.9", "10.0.0.2->10.0.0.1"}
	if !slices.Equal(got, want) {
		t.Fatalf("SortedPairs = %v, want %v", got, want)
	}
}
