package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// Files names the PEM files of a TLS identity: the CA certificates peers
// must chain to, one's own certificate (optionally followed by
// intermediates) and its private key. Operators who run their own CA supply
// these paths; their certificates must carry a bulkhead://ROLE/NAME URI.
type Files struct {
	CA   string
	Cert string
	Key  string
}

// DirFiles returns the files InitCA and Issue write for name in dir:
// dir/ca.crt, dir/NAME.crt and dir/NAME.key.
func DirFiles(dir, name string) Files {
	return Files{
		CA:   filepath.Join(dir, CACertFile),
		Cert: filepath.Join(dir, name+".crt"),
		Key:  filepath.Join(dir, name+".key"),
	}
}

// ServerTLS returns the TLS 1.3 configuration of a server (a controller, or
// a host) holding name's certificate in dir: see ServerTLSFiles.
func ServerTLS(dir, name string) (*tls.Config, error) {
	return ServerTLSFiles(DirFiles(dir, name))
}

// ClientTLS returns the TLS 1.3 configuration of a client (an agent, an
// operator or a controller) holding name's certificate in dir that dials a
// controller: see ClientTLSFiles.
func ClientTLS(dir, name string) (*tls.Config, error) {
	return ClientTLSFiles(DirFiles(dir, name))
}

// ServerTLSFiles returns the TLS 1.3 configuration of a server presenting
// f.Cert and f.Key. It requires every client to present a certificate that
// chains to f.CA, is valid for client authentication and carries exactly one
// bulkhead://ROLE/NAME URI; the handler then learns who the client is with
// Identity or Require. To serve clients without certificates too (the
// operator API with bearer tokens), set ClientAuth to
// tls.VerifyClientCertIfGiven on the returned configuration: certificates
// that are given are still verified and must still carry an identity.
//
// It refuses, with an error naming the file, a certificate that does not
// match its key, does not chain to f.CA, is not valid now, is not valid for
// server authentication, or carries no identity of a Host or a Controller.
func ServerTLSFiles(f Files) (*tls.Config, error) {
	return serverTLS(f, time.Now())
}

// ClientTLSFiles returns the TLS 1.3 configuration of a client presenting
// f.Cert and f.Key to a controller. It accepts only a server whose
// certificate chains to f.CA, matches the name dialled (ServerName, which
// tls.Dial and gRPC fill in from the address) and carries the identity of a
// Controller.
//
// It refuses, with an error naming the file, a certificate that does not
// match its key, does not chain to f.CA, is not valid now, is not valid for
// client authentication, or carries no identity.
func ClientTLSFiles(f Files) (*tls.Config, error) {
	return clientTLS(f, time.Now())
}

func serverTLS(f Files, now time.Time) (*tls.Config, error) {
	cert, pool, role, err := loadIdentity(f, x509.ExtKeyUsageServerAuth, now)
	if err != nil {
		return nil, fmt.Errorf("server TLS: %w", err)
	}
	if role != Host && role != Controller {
		return nil, fmt.Errorf("server TLS: %s carries the identity of an %s, which cannot serve", f.Cert, role)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil // allowed only if ClientAuth allows it
			}
			if _, _, err := Identity(cs); err != nil {
				return fmt.Errorf("client identity: %w", err)
			}
			return nil
		},
	}, nil
}

func clientTLS(f Files, now time.Time) (*tls.Config, error) {
	cert, pool, _, err := loadIdentity(f, x509.ExtKeyUsageClientAuth, now)
	if err != nil {
		return nil, fmt.Errorf("client TLS: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if _, err := Require(cs, Controller); err != nil {
				return fmt.Errorf("server identity: %w", err)
			}
			return nil
		},
	}, nil
}

// loadIdentity loads f and checks that the certificate verifies against the
// CA for usage at time now and carries an identity.
func loadIdentity(f Files, usage x509.ExtKeyUsage, now time.Time) (tls.Certificate, *x509.CertPool, Role, error) {
	cas, err := readCerts(f.CA)
	if err != nil {
		return tls.Certificate{}, nil, 0, fmt.Errorf("CA: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return tls.Certificate{}, nil, 0, fmt.Errorf("key pair %s, %s: %w", f.Cert, f.Key, err)
	}
	if len(cert.Certificate) == 0 {
		return tls.Certificate{}, nil, 0, fmt.Errorf("%s: no certificate", f.Cert)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return tls.Certificate{}, nil, 0, fmt.Errorf("%s: %w", f.Cert, err)
		}
		cert.Leaf = leaf
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return tls.Certificate{}, nil, 0, fmt.Errorf("%s: %w", f.Cert, err)
		}
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	}); err != nil {
		var inv x509.CertificateInvalidError
		if errors.As(err, &inv) && inv.Reason == x509.IncompatibleUsage {
			return tls.Certificate{}, nil, 0, fmt.Errorf("%s is not valid for %s: %w", f.Cert, usageName(usage), err)
		}
		return tls.Certificate{}, nil, 0, fmt.Errorf("%s does not verify against %s: %w", f.Cert, f.CA, err)
	}
	role, _, err := CertIdentity(leaf)
	if err != nil {
		return tls.Certificate{}, nil, 0, fmt.Errorf("%s: %w", f.Cert, err)
	}
	return cert, pool, role, nil
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "server authentication"
	case x509.ExtKeyUsageClientAuth:
		return "client authentication"
	}
	return fmt.Sprintf("extended key usage %d", u)
}
