package wireauth

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// testMaster is a fixed master secret (0x00, 0x01, ..., 0x1f).
func testMaster() []byte {
	m := make([]byte, KeySize)
	for i := range m {
		m[i] = byte(i)
	}
	return m
}

// TestKnownAnswers pins the formats to an independent implementation
// (Python's hmac and hashlib, as the report says): the pair key of s1 and
// s2 under testMaster, and the tag of `{"v":2}` under it, so that another
// implementation (a controller in another language) can be checked
// against this one.
func TestKnownAnswers(t *testing.T) {
	k := PairKey(testMaster(), "s2", "s1")
	if got, want := hex.EncodeToString(k), "7b640dab124326a0d985e58c8c7ae0619418ca8b75e3f3aa4a825a6eb712a16d"; got != want {
		t.Errorf("PairKey(s2, s1) = %s, want %s", got, want)
	}
	d, err := Seal(k, []byte(`{"v":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(d[len(d)-TagSize:]), "ce3016247eec9ce2b794b38bdde208d48706e0b038b1a8389871cdd9c2cd26c0"; got != want {
		t.Errorf("tag %s, want %s", got, want)
	}
}

// TestPairKey: symmetric in the two hosts, and different for every other
// pair, master, or split of the same characters between the names.
func TestPairKey(t *testing.T) {
	m := testMaster()
	other := append([]byte(nil), m...)
	other[0] ^= 1
	base := PairKey(m, "s1", "s2")
	if len(base) != KeySize {
		t.Fatalf("key of %d bytes, want %d", len(base), KeySize)
	}
	for _, tc := range []struct {
		name   string
		master []byte
		a, b   string
		same   bool
	}{
		{"same pair", m, "s1", "s2", true},
		{"swapped", m, "s2", "s1", true},
		{"another pair", m, "s1", "s3", false},
		{"other host of the pair", m, "s3", "s2", false},
		{"another master", other, "s1", "s2", false},
		{"names split elsewhere", m, "s1s", "2", false},
		{"separator inside a name", m, "s1\x00s2", "", false},
		{"one name empty", m, "", "s1s2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := PairKey(tc.master, tc.a, tc.b)
			if bytes.Equal(k, base) != tc.same {
				t.Errorf("PairKey(%q, %q) equal to PairKey(s1, s2): %v, want %v", tc.a, tc.b, !tc.same, tc.same)
			}
			if !bytes.Equal(k, PairKey(tc.master, tc.b, tc.a)) {
				t.Errorf("PairKey(%q, %q) not symmetric", tc.a, tc.b)
			}
		})
	}
	// names whose concatenation with a NUL separator collides
	if bytes.Equal(PairKey(m, "a\x00b", "c"), PairKey(m, "a", "b\x00c")) {
		t.Error("PairKey(a\\0b, c) == PairKey(a, b\\0c)")
	}
}

// TestKeys: the derived resolver gives both hosts of a pair the same
// key, no key for the host itself; KeyMap gives the keys it was given
// and no others, and does not share the caller's map or slices.
func TestKeys(t *testing.T) {
	m := testMaster()
	k1, k2 := Keys(m, "s1"), Keys(m, "s2")
	a, ok1 := k1("s2")
	b, ok2 := k2("s1")
	if !ok1 || !ok2 || !bytes.Equal(a, b) || !bytes.Equal(a, PairKey(m, "s1", "s2")) {
		t.Errorf("s1's key for s2 %x (%v), s2's for s1 %x (%v)", a, ok1, b, ok2)
	}
	if _, ok := k1("s1"); ok {
		t.Error("a key for the host itself")
	}
	m[0] ^= 1 // Keys copied the master
	if c, _ := k1("s2"); !bytes.Equal(c, a) {
		t.Error("Keys uses the caller's master slice")
	}
	key := PairKey(testMaster(), "s1", "s2")
	given := map[string][]byte{"s2": append([]byte(nil), key...)}
	km := KeyMap(given)
	given["s2"][0] ^= 1
	given["s3"] = key
	if k, ok := km("s2"); !ok || !bytes.Equal(k, key) {
		t.Errorf("KeyMap s2: %x %v", k, ok)
	}
	if _, ok := km("s3"); ok {
		t.Error("KeyMap sees a key added to the caller's map")
	}
}

// TestSealOpen: a sealed payload opens under its key only, and any
// change to the datagram (a bit of the payload or tag, bytes cut or
// appended, the tag alone, the payload alone) is refused.
func TestSealOpen(t *testing.T) {
	key := PairKey(testMaster(), "s1", "s2")
	wrong := PairKey(testMaster(), "s1", "s3")
	payload := []byte(`{"v":2,"from":"s1","to":"s2","epoch":1,"seq":1,"body":{"kind":"x"}}`)
	sealed, err := Seal(key, payload)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != len(payload)+TagSize || !bytes.Equal(sealed[:len(payload)], payload) {
		t.Fatalf("sealed %q", sealed)
	}
	flip := func(i int) []byte {
		d := bytes.Clone(sealed)
		d[i] ^= 0x01
		return d
	}
	for _, tc := range []struct {
		name  string
		key   []byte
		data  []byte
		err   error // nil: opens to payload
		plain []byte
	}{
		{"genuine", key, sealed, nil, payload},
		{"empty payload", key, mustSeal(t, key, nil), nil, []byte{}},
		{"wrong key", wrong, sealed, ErrAuth, nil},
		{"unsigned", key, payload, ErrAuth, nil},
		{"payload bit flipped (first)", key, flip(0), ErrAuth, nil},
		{"payload bit flipped (last)", key, flip(len(payload) - 1), ErrAuth, nil},
		{"tag bit flipped (first)", key, flip(len(payload)), ErrAuth, nil},
		{"tag bit flipped (last)", key, flip(len(sealed) - 1), ErrAuth, nil},
		{"one byte cut", key, sealed[:len(sealed)-1], ErrAuth, nil},
		{"one byte appended", key, append(bytes.Clone(sealed), 0), ErrAuth, nil},
		{"tag alone", key, sealed[len(payload):], ErrAuth, nil},
		{"shorter than a tag", key, sealed[:TagSize-1], ErrAuth, nil},
		{"empty", key, nil, ErrAuth, nil},
		{"sealed with another key", key, mustSeal(t, wrong, payload), ErrAuth, nil},
		{"short key", key[:MinKeySize-1], sealed, ErrKey, nil},
		{"no key", nil, sealed, ErrKey, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Open(tc.key, tc.data)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Errorf("error %v, want %v (opened to %q)", err, tc.err, got)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.plain) {
				t.Errorf("opened to %q, %v; want %q", got, err, tc.plain)
			}
		})
	}
	if _, err := Seal(key[:MinKeySize-1], payload); !errors.Is(err, ErrKey) {
		t.Errorf("Seal with a short key: %v", err)
	}
}

func mustSeal(t testing.TB, key, payload []byte) []byte {
	t.Helper()
	d, err := Seal(key, payload)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// FuzzOpen: Open never panics; a datagram the fuzzer makes never opens
// under a key it does not have (the test's secret key), unless it is
// exactly a datagram sealed under that key; a payload sealed under the
// fuzzer's key opens under that key to the same payload and under the
// secret key only if the two keys are the same; one flipped bit is
// always refused.
func FuzzOpen(f *testing.F) {
	secret := PairKey(testMaster(), "s1", "s2")
	f.Add([]byte(`{"v":2}`), []byte("0123456789abcdef"), uint(3))
	f.Add([]byte{}, []byte{}, uint(0))
	f.Add(mustSeal(f, secret, []byte(`{"v":2}`)), secret[:16], uint(40))
	f.Fuzz(func(t *testing.T, data, key []byte, bit uint) {
		if p, err := Open(secret, data); err == nil && !bytes.Equal(mustSeal(t, secret, p), data) {
			t.Fatalf("opened a datagram that is not the sealed payload: %q", data)
		}
		_, _ = Open(key, data) // must not panic
		if len(key) < MinKeySize {
			if _, err := Seal(key, data); !errors.Is(err, ErrKey) {
				t.Fatalf("sealed with a %d-byte key: %v", len(key), err)
			}
			return
		}
		sealed := mustSeal(t, key, data)
		if p, err := Open(key, sealed); err != nil || !bytes.Equal(p, data) {
			t.Fatalf("round trip: %q, %v", p, err)
		}
		if _, err := Open(secret, sealed); (err == nil) != bytes.Equal(key, secret) {
			t.Fatalf("sealed under %x, opened under the secret key: %v", key, err)
		}
		i := bit % uint(len(sealed)*8)
		sealed[i/8] ^= 1 << (i % 8)
		if _, err := Open(key, sealed); err == nil {
			t.Fatalf("opened with bit %d flipped", i)
		}
	})
}
