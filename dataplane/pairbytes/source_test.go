package pairbytes

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
	src, err := os.ReadFile("bpf/pairbytes.c")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile("bpf/pairbytes.c.sha256")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	fields := strings.Fields(string(rec))
	if len(fields) != 2 || fields[1] != "bpf/pairbytes.c" {
		t.Fatalf("bpf/pairbytes.c.sha256: %q, want \"DIGEST  bpf/pairbytes.c\"", rec)
	}
	if got := hex.EncodeToString(sum[:]); got != fields[0] {
		t.Errorf("bpf/pairbytes.c has digest %s, the objects were generated from %s: run go generate ./dataplane/pairbytes", got, fields[0])
	}
}
