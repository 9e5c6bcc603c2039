package seqloss

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// TestObjectsMatchSource: the committed objects were generated from the
// committed C source (go generate records its digest next to it).
func TestObjectsMatchSource(t *testing.T) {
	src, err := os.ReadFile("bpf/seqloss.c")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile("bpf/seqloss.c.sha256")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	fields := strings.Fields(string(rec))
	if len(fields) != 2 || fields[1] != "bpf/seqloss.c" {
		t.Fatalf("bpf/seqloss.c.sha256: %q, want \"DIGEST  bpf/seqloss.c\"", rec)
	}
	if got := hex.EncodeToString(sum[:]); got != fields[0] {
		t.Errorf("bpf/seqloss.c has digest %s, the objects were generated from %s: run go generate ./dataplane/seqloss", got, fields[0])
	}
}
