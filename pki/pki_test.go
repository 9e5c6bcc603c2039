package pki

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var loopback = []net.IP{net.IPv4(127, 0, 0, 1)}

// newCA makes a CA in a fresh directory and returns the directory.
func newCA(t *testing.T, cn string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	if err := InitCA(dir, cn); err != nil {
		t.Fatalf("InitCA: %v", err)
	}
	return dir
}

// newCAAt makes a CA at time now in a fresh directory and returns the
// directory.
func newCAAt(t *testing.T, cn string, now time.Time) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	if err := (issuer{now: func() time.Time { return now }}).initCA(dir, cn); err != nil {
		t.Fatalf("InitCA: %v", err)
	}
	return dir
}

// issueAt issues r with the clock at now.
func issueAt(t *testing.T, dir string, r Request, now time.Time) {
	t.Helper()
	if _, _, err := (issuer{now: func() time.Time { return now }}).issue(dir, r); err != nil {
		t.Fatalf("issue %s %s: %v", r.Role, r.Name, err)
	}
}

// rawCert signs tmpl (with a fresh key) by the CA in dir without any of
// Issue's checks, writes NAME.crt and NAME.key to a fresh directory and
// returns the key pair: certificates Issue would never make.
func rawCert(t *testing.T, dir string, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	ca, caKey, err := loadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber, err = newSerial()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(encodeCert(der), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func leafTemplate(cn string, uris ...string) *x509.Certificate {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			panic(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	return tmpl
}

func caPool(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	cas, err := readCerts(filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AddCert(cas[0])
	return p
}

type handshakeResult struct {
	server, client       tls.ConnectionState
	serverErr, clientErr error
}

// handshake runs one TLS connection over loopback: the server completes its
// handshake and writes "ok"; the client dials and reads it (in TLS 1.3 a
// client learns that the server refused its certificate only on reading).
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) handshakeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var res handshakeResult
	var wg sync.WaitGroup
	wg.Go(func() {
		conn, err := ln.Accept()
		if err != nil {
			res.serverErr = err
			return
		}
		defer conn.Close()
		deadline, _ := ctx.Deadline()
		if err := conn.SetDeadline(deadline); err != nil {
			res.serverErr = err
			return
		}
		tc := tls.Server(conn, serverCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			res.serverErr = err
			return
		}
		res.server = tc.ConnectionState()
		if _, err := tc.Write([]byte("ok")); err != nil {
			res.serverErr = err
		}
	})
	d := tls.Dialer{Config: clientCfg}
	conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		res.clientErr = err
	} else {
		tc := conn.(*tls.Conn)
		res.client = tc.ConnectionState()
		deadline, _ := ctx.Deadline()
		if err := conn.SetDeadline(deadline); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2)
		if _, err := io.ReadFull(conn, buf); err != nil {
			res.clientErr = err
		} else if string(buf) != "ok" {
			res.clientErr = errors.New("read " + string(buf))
		}
		conn.Close()
	}
	wg.Wait()
	return res
}

func checkErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: unexpected error: %v", what, err)
	case want != "" && err == nil:
		t.Errorf("%s: no error, want one containing %q", what, want)
	case want != "" && want != "*" && !strings.Contains(err.Error(), want):
		t.Errorf("%s: error %q does not contain %q", what, err, want)
	}
}

func TestHandshake(t *testing.T) {
	now := time.Now()
	past := now.Add(-48 * time.Hour) // certificates issued then for 24 h have expired
	// The CAs are made before the expired certificates were issued.
	a := newCAAt(t, "CA A", past.Add(-time.Hour))
	b := newCAAt(t, "CA B", past.Add(-time.Hour))
	for _, r := range []Request{
		{Name: "ctl", Role: Controller, IPs: loopback},
		{Name: "ctl-2", Role: Controller, DNS: []string{"ctl-2.example"}, IPs: loopback},
		{Name: "h1", Role: Host},
		{Name: "host-srv", Role: Host, IPs: loopback},
		{Name: "op", Role: Operator},
	} {
		issueAt(t, a, r, now)
	}
	issueAt(t, a, Request{Name: "h-expired", Role: Host, Validity: 24 * time.Hour}, past)
	issueAt(t, a, Request{Name: "ctl-expired", Role: Controller, IPs: loopback, Validity: 24 * time.Hour}, past)
	issueAt(t, b, Request{Name: "h1", Role: Host}, now)
	issueAt(t, b, Request{Name: "ctl", Role: Controller, IPs: loopback}, now)

	server := func(dir, name string, at time.Time) func(*testing.T) *tls.Config {
		return func(t *testing.T) *tls.Config {
			cfg, err := serverTLS(DirFiles(dir, name), at)
			if err != nil {
				t.Fatal(err)
			}
			return cfg
		}
	}
	client := func(dir, name string, at time.Time) func(*testing.T) *tls.Config {
		return func(t *testing.T) *tls.Config {
			cfg, err := clientTLS(DirFiles(dir, name), at)
			if err != nil {
				t.Fatal(err)
			}
			return cfg
		}
	}
	raw := func(uris ...string) func(*testing.T) *tls.Config {
		return func(t *testing.T) *tls.Config {
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				RootCAs:      caPool(t, a),
				Certificates: []tls.Certificate{rawCert(t, a, leafTemplate("raw", uris...))},
			}
		}
	}
	type who struct {
		role Role
		name string
	}
	for _, tc := range []struct {
		name           string
		server, client func(*testing.T) *tls.Config
		// Substrings of the errors each side must report ("*": any
		// error); "" for none.
		serverErr, clientErr string
		// Who each side sees, when the handshake succeeds.
		serverSees, clientSees who
		// The server requires one of these roles of its peer.
		require    []Role
		requireErr string
	}{
		{
			name:   "host to controller",
			server: server(a, "ctl", now), client: client(a, "h1", now),
			serverSees: who{Host, "h1"}, clientSees: who{Controller, "ctl"},
			require: []Role{Host},
		},
		{
			name:   "operator to controller",
			server: server(a, "ctl", now), client: client(a, "op", now),
			serverSees: who{Operator, "op"}, clientSees: who{Controller, "ctl"},
			require: []Role{Operator},
		},
		{
			name:   "controller to controller",
			server: server(a, "ctl", now), client: client(a, "ctl-2", now),
			serverSees: who{Controller, "ctl-2"}, clientSees: who{Controller, "ctl"},
			require: []Role{Host, Controller},
		},
		{
			name:   "host certificate where an operator is required",
			server: server(a, "ctl", now), client: client(a, "h1", now),
			serverSees: who{Host, "h1"}, clientSees: who{Controller, "ctl"},
			require: []Role{Operator}, requireErr: "peer host/h1 is not allowed here (want role operator)",
		},
		{
			name:   "client from another CA",
			server: server(a, "ctl", now),
			client: func(t *testing.T) *tls.Config {
				cfg := client(b, "h1", now)(t)
				cfg.RootCAs = caPool(t, a) // it trusts the server
				// and presents its certificate although the server asks
				// for one from CA A (Go's client would send none).
				own := cfg.Certificates[0]
				cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &own, nil }
				return cfg
			},
			serverErr: "certificate signed by unknown authority", clientErr: "*",
		},
		{
			name:   "server from another CA",
			server: server(b, "ctl", now), client: client(a, "h1", now),
			serverErr: "*", clientErr: "certificate signed by unknown authority",
		},
		{
			name:   "expired client",
			server: server(a, "ctl", now), client: client(a, "h-expired", past.Add(time.Hour)),
			serverErr: "certificate has expired", clientErr: "*",
		},
		{
			name:   "expired server",
			server: server(a, "ctl-expired", past.Add(time.Hour)), client: client(a, "h1", now),
			serverErr: "*", clientErr: "certificate has expired",
		},
		{
			name:   "server is a host, not a controller",
			server: server(a, "host-srv", now), client: client(a, "h1", now),
			serverErr: "*", clientErr: "peer host/host-srv is not allowed here (want role controller)",
		},
		{
			name:   "client without a certificate",
			server: server(a, "ctl", now),
			client: func(t *testing.T) *tls.Config {
				return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: caPool(t, a)}
			},
			serverErr: "client didn't provide a certificate", clientErr: "*",
		},
		{
			name:   "client certificate without identity",
			server: server(a, "ctl", now), client: raw(),
			serverErr: "carries no bulkhead:// URI", clientErr: "*",
		},
		{
			name:   "client certificate with two identities",
			server: server(a, "ctl", now), client: raw("bulkhead://operator/x", "bulkhead://host/x"),
			serverErr: "carries 2 bulkhead:// URIs", clientErr: "*",
		},
		{
			name:   "TLS 1.2 client",
			server: server(a, "ctl", now),
			client: func(t *testing.T) *tls.Config {
				cfg := client(a, "h1", now)(t)
				cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
				return cfg
			},
			serverErr: "client offered only unsupported versions", clientErr: "*",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := handshake(t, tc.server(t), tc.client(t))
			checkErr(t, "server", res.serverErr, tc.serverErr)
			checkErr(t, "client", res.clientErr, tc.clientErr)
			if res.serverErr != nil || res.clientErr != nil {
				return
			}
			if v := res.server.Version; v != tls.VersionTLS13 {
				t.Errorf("version %x, want TLS 1.3", v)
			}
			for _, side := range []struct {
				what  string
				state tls.ConnectionState
				want  who
			}{{"server", res.server, tc.serverSees}, {"client", res.client, tc.clientSees}} {
				role, name, err := Identity(side.state)
				if err != nil || role != side.want.role || name != side.want.name {
					t.Errorf("%s sees %v %q (err %v), want %v %q", side.what, role, name, err, side.want.role, side.want.name)
				}
			}
			name, err := Require(res.server, tc.require...)
			checkErr(t, "require", err, tc.requireErr)
			if err == nil && name != tc.serverSees.name {
				t.Errorf("Require: name %q, want %q", name, tc.serverSees.name)
			}
		})
	}
}

func TestInitCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "pki")
	before := time.Now()
	if err := InitCA(dir, "test CA"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		perm os.FileMode
	}{{dir, 0o700 | os.ModeDir}, {filepath.Join(dir, CAKeyFile), 0o600}, {filepath.Join(dir, CACertFile), 0o644}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeDir); got != f.perm {
			t.Errorf("%s: mode %v, want %v", f.path, got, f.perm)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{CACertFile, CAKeyFile}; !slices.Equal(names, want) {
		t.Errorf("files %v, want %v (no temporaries left)", names, want)
	}
	ca, key, err := loadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.IsCA || ca.Subject.CommonName != "test CA" || !ca.MaxPathLenZero || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA certificate: IsCA %v CN %q MaxPathLenZero %v KeyUsage %v", ca.IsCA, ca.Subject.CommonName, ca.MaxPathLenZero, ca.KeyUsage)
	}
	if pub, ok := key.Public().(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key %T, want ECDSA P-256", key.Public())
	}
	if end := before.Add(CAValidity); ca.NotAfter.Before(end.Add(-time.Second)) || ca.NotAfter.After(end.Add(time.Minute)) {
		t.Errorf("CA valid until %v, want about %v", ca.NotAfter, end)
	}
	if err := ca.CheckSignatureFrom(ca); err != nil {
		t.Errorf("CA not self-signed: %v", err)
	}
}

func TestInitCARefusesOverwrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		present []string // files that exist before InitCA
		want    string   // the file the error names
	}{
		{"whole CA", []string{CACertFile, CAKeyFile}, CAKeyFile},
		{"key only", []string{CAKeyFile}, CAKeyFile},
		{"certificate only", []string{CACertFile}, CACertFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newCA(t, "first")
			before := map[string][]byte{}
			for _, f := range []string{CACertFile, CAKeyFile} {
				p := filepath.Join(dir, f)
				if !slices.Contains(tc.present, f) {
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
					continue
				}
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				before[f] = data
			}
			err := InitCA(dir, "second")
			checkErr(t, "InitCA", err, filepath.Join(dir, tc.want)+" already exists")
			for _, f := range []string{CACertFile, CAKeyFile} {
				data, err := os.ReadFile(filepath.Join(dir, f))
				switch {
				case before[f] == nil && err == nil:
					t.Errorf("%s created", f)
				case before[f] != nil && string(data) != string(before[f]):
					t.Errorf("%s changed", f)
				}
			}
		})
	}
}

// TestInitCARace: of several InitCA at once in one directory, exactly one
// succeeds, and the CA left is whole.
func TestInitCARace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = InitCA(dir, "race") })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if !strings.Contains(err.Error(), "already exists") {
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d InitCA succeeded, want 1", ok, n)
	}
	if _, _, err := loadCA(dir); err != nil {
		t.Errorf("CA left: %v", err)
	}
}

func TestIssue(t *testing.T) {
	dir := newCA(t, "CA")
	ca, _, err := loadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a.", 125) + "z" // 251 characters
	for _, tc := range []struct {
		req     Request
		uri     string
		eku     []x509.ExtKeyUsage
		usage   x509.ExtKeyUsage
		wantErr bool
	}{
		{
			req: Request{Name: "server-1.rack-2", Role: Host, IPs: []net.IP{net.ParseIP("10.0.0.1")}},
			uri: "bulkhead://host/server-1.rack-2",
			eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		},
		{
			req: Request{Name: "ctl-a", Role: Controller, DNS: []string{"ctl-a.bulkhead.example"}, IPs: loopback, Validity: 30 * 24 * time.Hour},
			uri: "bulkhead://controller/ctl-a",
			eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		},
		{
			req: Request{Name: "alice", Role: Operator},
			uri: "bulkhead://operator/alice",
			eku: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		{
			req: Request{Name: long, Role: Host},
			uri: "bulkhead://host/" + long,
			eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		},
	} {
		t.Run(tc.req.Role.String()+"/"+tc.req.Name[:min(len(tc.req.Name), 20)], func(t *testing.T) {
			before := time.Now()
			certPath, keyPath, err := Issue(dir, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if certPath != filepath.Join(dir, tc.req.Name+".crt") || keyPath != filepath.Join(dir, tc.req.Name+".key") {
				t.Errorf("paths %s, %s", certPath, keyPath)
			}
			if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("key %s: %v, err %v; want mode 0600", keyPath, fi.Mode(), err)
			}
			pair, err := tls.LoadX509KeyPair(certPath, keyPath)
			if err != nil {
				t.Fatal(err)
			}
			c := pair.Leaf
			var uris []string
			for _, u := range c.URIs {
				uris = append(uris, u.String())
			}
			if !slices.Equal(uris, []string{tc.uri}) {
				t.Errorf("URIs %v, want [%s]", uris, tc.uri)
			}
			if !slices.Equal(c.ExtKeyUsage, tc.eku) {
				t.Errorf("ExtKeyUsage %v, want %v", c.ExtKeyUsage, tc.eku)
			}
			cn := tc.req.Name
			if len(cn) > 64 {
				cn = ""
			}
			if c.Subject.CommonName != cn || c.IsCA {
				t.Errorf("CN %q IsCA %v", c.Subject.CommonName, c.IsCA)
			}
			if !slices.Equal(c.DNSNames, tc.req.DNS) || len(c.IPAddresses) != len(tc.req.IPs) {
				t.Errorf("SANs %v %v, want %v %v", c.DNSNames, c.IPAddresses, tc.req.DNS, tc.req.IPs)
			}
			validity := tc.req.Validity
			if validity == 0 {
				validity = DefaultValidity
			}
			if got := c.NotAfter.Sub(c.NotBefore); got != validity+Backdate {
				t.Errorf("valid for %v, want %v", got, validity+Backdate)
			}
			// X.509 times have a resolution of a second.
			if lo, hi := before.Add(-Backdate).Truncate(time.Second), time.Now().Add(-Backdate); c.NotBefore.Before(lo) || c.NotBefore.After(hi) {
				t.Errorf("NotBefore %v, want between %v and %v", c.NotBefore, lo, hi)
			}
			if err := c.CheckSignatureFrom(ca); err != nil {
				t.Errorf("not signed by the CA: %v", err)
			}
			role, name, err := CertIdentity(c)
			if err != nil || role != tc.req.Role || name != tc.req.Name {
				t.Errorf("CertIdentity: %v %q %v", role, name, err)
			}
		})
	}
}

func TestIssueRefuses(t *testing.T) {
	dir := newCA(t, "CA")
	if _, _, err := Issue(dir, Request{Name: "taken", Role: Host}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dir  string // "" = the CA's
		req  Request
		want string
	}{
		{"empty name", "", Request{Role: Host}, "empty name"},
		{"upper case", "", Request{Name: "Host1", Role: Host}, `invalid name "Host1"`},
		{"underscore", "", Request{Name: "host_1", Role: Host}, "invalid name"},
		{"leading dash", "", Request{Name: "-host", Role: Host}, "invalid name"},
		{"trailing dot", "", Request{Name: "host.", Role: Host}, "invalid name"},
		{"leading dot", "", Request{Name: ".host", Role: Host}, "invalid name"},
		{"slash", "", Request{Name: "a/b", Role: Host}, "invalid name"},
		{"dot dot", "", Request{Name: "../x", Role: Host}, "invalid name"},
		{"space", "", Request{Name: "a b", Role: Host}, "invalid name"},
		{"too long", "", Request{Name: strings.Repeat("a", 254), Role: Host}, "254 characters long (at most 253)"},
		{"too long for a file", "", Request{Name: strings.Repeat("a", 252), Role: Host}, "252 characters long: its file aaaaaaaaaaaaaaaaaaaa....key would exceed the file-name limit (at most 251)"},
		{"the CA's name", "", Request{Name: "ca", Role: Host}, "reserved"},
		{"zero role", "", Request{Name: "x", Role: 0}, "invalid role"},
		{"unknown role", "", Request{Name: "x", Role: 7}, "invalid role"},
		{"negative validity", "", Request{Name: "x", Role: Host, Validity: -time.Hour}, "negative validity"},
		{"outlasts the CA", "", Request{Name: "x", Role: Host, Validity: CAValidity + 24*time.Hour}, "after the CA's own end"},
		{"controller without addresses", "", Request{Name: "c", Role: Controller}, "needs the DNS names or IP addresses"},
		{"operator with addresses", "", Request{Name: "o", Role: Operator, DNS: []string{"o.example"}}, "takes no DNS names"},
		{"empty DNS name", "", Request{Name: "x", Role: Host, DNS: []string{""}}, "empty DNS name"},
		{"bad IP", "", Request{Name: "x", Role: Host, IPs: []net.IP{{1, 2, 3}}}, "invalid IP address"},
		{"no CA", t.TempDir(), Request{Name: "x", Role: Host}, CACertFile},
		{"existing certificate", "", Request{Name: "taken", Role: Host}, filepath.Join(dir, "taken.key") + " already exists (set Replace to renew it)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.dir
			if d == "" {
				d = dir
			}
			certPath, keyPath, err := Issue(d, tc.req)
			checkErr(t, "Issue", err, tc.want)
			if certPath != "" || keyPath != "" {
				t.Errorf("paths %q %q returned with an error", certPath, keyPath)
			}
		})
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"ca.crt", "ca.key", "taken.crt", "taken.key"}; !slices.Equal(names, want) {
		t.Errorf("files %v after refusals, want %v", names, want)
	}
}

func TestIssueReplace(t *testing.T) {
	dir := newCA(t, "CA")
	read := func() (string, string) {
		c, err := os.ReadFile(filepath.Join(dir, "h.crt"))
		if err != nil {
			t.Fatal(err)
		}
		k, err := os.ReadFile(filepath.Join(dir, "h.key"))
		if err != nil {
			t.Fatal(err)
		}
		return string(c), string(k)
	}
	if _, _, err := Issue(dir, Request{Name: "h", Role: Host}); err != nil {
		t.Fatal(err)
	}
	c1, k1 := read()
	if _, _, err := Issue(dir, Request{Name: "h", Role: Host, Replace: true}); err != nil {
		t.Fatal(err)
	}
	c2, k2 := read()
	if c1 == c2 || k1 == k2 {
		t.Error("Replace kept the old certificate or key")
	}
	if _, err := ClientTLS(dir, "h"); err != nil {
		t.Errorf("renewed pair does not load: %v", err)
	}
}

func TestLoadRefuses(t *testing.T) {
	now := time.Now()
	a := newCA(t, "CA A")
	b := newCA(t, "CA B")
	issueAt(t, a, Request{Name: "h1", Role: Host}, now)
	issueAt(t, a, Request{Name: "h2", Role: Host}, now)
	issueAt(t, a, Request{Name: "op", Role: Operator}, now)
	issueAt(t, a, Request{Name: "old", Role: Host, Validity: time.Hour}, now.Add(-2*time.Hour))
	issueAt(t, b, Request{Name: "h1", Role: Host}, now)
	// A certificate of CA A without identity, written out.
	noID := rawCert(t, a, leafTemplate("anon"))
	noIDDir := t.TempDir()
	keyPEM, err := encodeKey(noID.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(noIDDir, "anon.crt"), encodeCert(noID.Certificate[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(noIDDir, "anon.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	files := func(dir, name string) Files { return DirFiles(dir, name) }
	for _, tc := range []struct {
		name   string
		server bool
		f      Files
		want   string
	}{
		{"good client", false, files(a, "h1"), ""},
		{"good server", true, files(a, "h1"), ""},
		{"operator cannot serve", true, files(a, "op"), "op.crt is not valid for server authentication"},
		{"key of another", false, Files{CA: files(a, "").CA, Cert: files(a, "h1").Cert, Key: files(a, "h2").Key}, "private key does not match public key"},
		{"certificate of another CA", false, Files{CA: files(a, "").CA, Cert: files(b, "h1").Cert, Key: files(b, "h1").Key}, "does not verify against " + files(a, "").CA},
		{"expired", false, files(a, "old"), "certificate has expired"},
		{"no identity", false, Files{CA: files(a, "").CA, Cert: filepath.Join(noIDDir, "anon.crt"), Key: filepath.Join(noIDDir, "anon.key")}, "carries no bulkhead:// URI"},
		{"missing CA", false, Files{CA: filepath.Join(noIDDir, "none.crt"), Cert: files(a, "h1").Cert, Key: files(a, "h1").Key}, filepath.Join(noIDDir, "none.crt")},
		{"missing key", false, Files{CA: files(a, "").CA, Cert: files(a, "h1").Cert, Key: filepath.Join(noIDDir, "none.key")}, filepath.Join(noIDDir, "none.key")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.server {
				_, err = ServerTLSFiles(tc.f)
			} else {
				_, err = ClientTLSFiles(tc.f)
			}
			checkErr(t, "load", err, tc.want)
		})
	}
}

func TestCertIdentity(t *testing.T) {
	for _, tc := range []struct {
		uris     []string
		wantRole Role
		wantName string
		wantErr  string
	}{
		{[]string{"bulkhead://host/h1"}, Host, "h1", ""},
		{[]string{"bulkhead://controller/c.1"}, Controller, "c.1", ""},
		{[]string{"bulkhead://operator/op"}, Operator, "op", ""},
		{[]string{"bulkhead://host/" + strings.Repeat("a", 253)}, Host, strings.Repeat("a", 253), ""},
		{[]string{"bulkhead://host/" + strings.Repeat("a", 254)}, 0, "", "254 characters long"},
		{[]string{"spiffe://example.org/x", "bulkhead://host/h1"}, Host, "h1", ""},
		{nil, 0, "", "carries no bulkhead:// URI"},
		{[]string{"spiffe://example.org/x"}, 0, "", "carries no bulkhead:// URI"},
		{[]string{"bulkhead://host/a", "bulkhead://operator/a"}, 0, "", "carries 2 bulkhead:// URIs"},
		{[]string{"bulkhead://admin/a"}, 0, "", `unknown role "admin"`},
		{[]string{"bulkhead://host/A"}, 0, "", "invalid name"},
		{[]string{"bulkhead://host/a/b"}, 0, "", "invalid name"},
		{[]string{"bulkhead://host/ca"}, 0, "", "reserved"},
		{[]string{"bulkhead://host"}, 0, "", "has no name"},
		{[]string{"bulkhead://host:1/a"}, 0, "", "malformed"},
		{[]string{"bulkhead://host/a?x=1"}, 0, "", "malformed"},
		{[]string{"bulkhead://u@host/a"}, 0, "", "malformed"},
	} {
		name := strings.Join(tc.uris, ",")
		t.Run(name[:min(len(name), 48)], func(t *testing.T) {
			role, name, err := CertIdentity(leafTemplate("c", tc.uris...))
			checkErr(t, "CertIdentity", err, tc.wantErr)
			if role != tc.wantRole || name != tc.wantName {
				t.Errorf("got %v %q, want %v %q", role, name, tc.wantRole, tc.wantName)
			}
		})
	}
	// A state whose peer certificate the TLS stack did not verify.
	c := leafTemplate("c", "bulkhead://operator/op")
	for _, tc := range []struct {
		state tls.ConnectionState
		want  string
	}{
		{tls.ConnectionState{}, "presented no certificate"},
		{tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}, "not verified"},
	} {
		if _, _, err := Identity(tc.state); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Identity: %v, want an error containing %q", err, tc.want)
		}
	}
}

func TestRole(t *testing.T) {
	for _, r := range []Role{Host, Controller, Operator} {
		got, err := ParseRole(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v", r.String(), got, err)
		}
	}
	for _, s := range []string{"", "Host", "admin"} {
		if _, err := ParseRole(s); err == nil {
			t.Errorf("ParseRole(%q) accepted", s)
		}
	}
	if s := Role(0).String(); s != "Role(0)" {
		t.Errorf("Role(0).String() = %q", s)
	}
}

func TestToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok := NewToken()
		b, err := hex.DecodeString(tok)
		if err != nil || len(b) != TokenBytes || strings.ToLower(tok) != tok {
			t.Fatalf("token %q: %d bytes, err %v", tok, len(b), err)
		}
		if seen[tok] {
			t.Fatalf("token %q repeated", tok)
		}
		seen[tok] = true
	}
	tok := NewToken()
	for _, tc := range []struct {
		presented, configured string
		want                  bool
	}{
		{tok, tok, true},
		{tok[:63] + "x", tok, false},
		{tok[:63], tok, false},
		{tok + "0", tok, false},
		{"", tok, false},
		{strings.ToUpper(tok), tok, tok == strings.ToUpper(tok)},
		{"", "", false},
		{"x", "", false},
	} {
		if got := TokenEqual(tc.presented, tc.configured); got != tc.want {
			t.Errorf("TokenEqual(%q, %q) = %v, want %v", tc.presented, tc.configured, got, tc.want)
		}
	}
}
