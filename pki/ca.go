package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// The lifetimes and the clock-skew allowance of what this package issues.
const (
	// CAValidity is how long the CA made by InitCA is valid.
	CAValidity = 10 * 365 * 24 * time.Hour
	// DefaultValidity is how long a certificate is valid when the Request
	// does not say.
	DefaultValidity = 365 * 24 * time.Hour
	// Backdate is how far before the moment of issue a certificate's
	// validity starts, so that a machine whose clock is slightly behind the
	// issuer's accepts it at once.
	Backdate = 5 * time.Minute
)

// maxCommonNameLen is X.509's upper bound of a common name (RFC 5280,
// ub-common-name).
const maxCommonNameLen = 64

// The file names of the CA in its directory.
const (
	CACertFile = caName + ".crt"
	CAKeyFile  = caName + ".key"
)

// Request describes a certificate to issue.
type Request struct {
	// Name names the holder (a host's name, a controller's, an operator's):
	// lowercase letters, digits, '-' and '.', at most MaxIssueNameLen
	// characters, starting and ending with a letter or digit; not "ca". It
	// is the NAME of the certificate's bulkhead://ROLE/NAME URI and of its
	// files NAME.crt and NAME.key, and its common name if at most 64
	// characters long (the X.509 limit; the URI is what identifies).
	Name string
	// Role is what the holder may do (Host, Controller or Operator).
	Role Role
	// DNS and IPs are the names and addresses the holder serves at
	// (subject alternative names that clients check against the address
	// they dial). A Controller needs at least one; an Operator has none.
	DNS []string
	IPs []net.IP
	// Validity is how long the certificate is valid; zero means
	// DefaultValidity. It may not outlast the CA.
	Validity time.Duration
	// Replace lets Issue replace an existing certificate and key of the
	// same name (renewal); without it Issue refuses to overwrite them.
	Replace bool
}

// InitCA creates a certificate authority in dir: an ECDSA P-256 key
// (dir/ca.key, mode 0600) and a self-signed certificate valid for CAValidity
// (dir/ca.crt) whose subject's common name is commonName ("bulkhead CA" if
// empty). It creates dir (mode 0700) if needed and refuses, naming the file,
// if either file already exists: a CA is never overwritten.
func InitCA(dir, commonName string) error {
	return issuer{now: time.Now}.initCA(dir, commonName)
}

// Issue signs a new key pair for r.Name with the CA in dir (made by InitCA)
// and writes the certificate to dir/NAME.crt and the key to dir/NAME.key
// (mode 0600), returning their paths. The certificate carries the URI
// bulkhead://ROLE/NAME and the extended key usages of the role: server and
// client authentication for a Host or a Controller, client authentication
// only for an Operator.
func Issue(dir string, r Request) (certPath, keyPath string, err error) {
	return issuer{now: time.Now}.issue(dir, r)
}

// issuer issues certificates at the time its clock gives (tests issue in
// the past to get expired certificates).
type issuer struct {
	now func() time.Time
}

func (is issuer) initCA(dir, commonName string) error {
	if commonName == "" {
		commonName = "bulkhead CA"
	}
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	for _, p := range []string{keyPath, certPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("init CA: %s already exists; refusing to overwrite a CA", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("init CA: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("init CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("init CA: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return fmt.Errorf("init CA: %w", err)
	}
	now := is.now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Bulkhead"}},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("init CA: sign: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return fmt.Errorf("init CA: %w", err)
	}
	if err := writeFileAtomic(keyPath, keyPEM, 0o600, false); err != nil {
		return fmt.Errorf("init CA: %w", err)
	}
	if err := writeFileAtomic(certPath, encodeCert(der), 0o644, false); err != nil {
		// The key is ours (we just created it): leave no CA without a
		// certificate behind.
		if rerr := os.Remove(keyPath); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("init CA: %w", err)
	}
	return nil
}

func (is issuer) issue(dir string, r Request) (certPath, keyPath string, err error) {
	if err := checkName(r.Name); err != nil {
		return "", "", fmt.Errorf("issue certificate: %w", err)
	}
	if len(r.Name) > MaxIssueNameLen {
		return "", "", fmt.Errorf("issue certificate: name %.20q... is %d characters long: its file %s.key would exceed the file-name limit (at most %d)",
			r.Name, len(r.Name), r.Name[:20]+"...", MaxIssueNameLen)
	}
	fail := func(err error) (string, string, error) {
		return "", "", fmt.Errorf("issue %s certificate %q: %w", r.Role, r.Name, err)
	}
	if !r.Role.valid() {
		return fail(errors.New("invalid role (want Host, Controller or Operator)"))
	}
	switch {
	case r.Validity < 0:
		return fail(fmt.Errorf("negative validity %v", r.Validity))
	case r.Validity == 0:
		r.Validity = DefaultValidity
	}
	switch {
	case r.Role == Controller && len(r.DNS) == 0 && len(r.IPs) == 0:
		return fail(errors.New("a controller certificate needs the DNS names or IP addresses it serves at (Request.DNS, Request.IPs)"))
	case r.Role == Operator && (len(r.DNS) > 0 || len(r.IPs) > 0):
		return fail(errors.New("an operator certificate is a client's: it takes no DNS names or IP addresses"))
	}
	for _, d := range r.DNS {
		if d == "" {
			return fail(errors.New("empty DNS name"))
		}
	}
	for _, ip := range r.IPs {
		if len(ip) != net.IPv4len && len(ip) != net.IPv6len {
			return fail(fmt.Errorf("invalid IP address %v", ip))
		}
	}
	caCert, caKey, err := loadCA(dir)
	if err != nil {
		return fail(err)
	}
	certPath, keyPath = filepath.Join(dir, r.Name+".crt"), filepath.Join(dir, r.Name+".key")
	if !r.Replace {
		for _, p := range []string{keyPath, certPath} {
			if _, err := os.Lstat(p); err == nil {
				return fail(fmt.Errorf("%s already exists (set Replace to renew it)", p))
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fail(err)
			}
		}
	}
	now := is.now()
	notAfter := now.Add(r.Validity)
	if notAfter.After(caCert.NotAfter) {
		return fail(fmt.Errorf("validity %v would end at %s, after the CA's own end %s",
			r.Validity, notAfter.UTC().Format(time.RFC3339), caCert.NotAfter.UTC().Format(time.RFC3339)))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(fmt.Errorf("generate key: %w", err))
	}
	serial, err := newSerial()
	if err != nil {
		return fail(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{OrganizationalUnit: []string{r.Role.String()}},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           r.Role.extKeyUsage(),
		BasicConstraintsValid: true,
		DNSNames:              r.DNS,
		IPAddresses:           r.IPs,
		URIs:                  []*url.URL{identityURI(r.Role, r.Name)},
	}
	if len(r.Name) <= maxCommonNameLen {
		tmpl.Subject.CommonName = r.Name
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return fail(fmt.Errorf("sign: %w", err))
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return fail(err)
	}
	if err := writeFileAtomic(keyPath, keyPEM, 0o600, r.Replace); err != nil {
		return fail(err)
	}
	if err := writeFileAtomic(certPath, encodeCert(der), 0o644, r.Replace); err != nil {
		if !r.Replace {
			if rerr := os.Remove(keyPath); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		return fail(err)
	}
	return certPath, keyPath, nil
}

// loadCA reads the CA's certificate and key from dir.
func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	certs, err := readCerts(certPath)
	if err != nil {
		return nil, nil, fmt.Errorf("load CA: %w", err)
	}
	ca := certs[0]
	if !ca.IsCA {
		return nil, nil, fmt.Errorf("load CA: %s is not a CA certificate", certPath)
	}
	key, err := readKey(keyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("load CA: %w", err)
	}
	if !publicKeysEqual(ca.PublicKey, key.Public()) {
		return nil, nil, fmt.Errorf("load CA: key %s does not match certificate %s", keyPath, certPath)
	}
	return ca, key, nil
}

// newSerial returns a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
