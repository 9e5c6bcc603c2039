// Package pki is Bulkhead's public-key infrastructure for the control plane:
// a certificate authority on local disk (InitCA), the certificates it issues
// to hosts, controllers and operators (Issue), mutual-TLS configurations
// built from them (ServerTLS, ClientTLS, and their Files variants for
// certificates an operator supplies), the identity of a verified peer
// (Identity, Require), and random bearer tokens for the operator API
// (NewToken, TokenEqual).
//
// A certificate says who holds it with exactly one URI subject alternative
// name of the form bulkhead://ROLE/NAME, where ROLE is host, controller or
// operator and NAME a lowercase DNS-like name (letters, digits, '-', '.',
// at most 253 characters, starting and ending with a letter or digit).
// Certificates an operator supplies from another CA must carry such a URI
// too: the controller authorises by role and name, never by common name.
//
// Keys are ECDSA P-256 in PKCS #8 PEM files written with mode 0600;
// directories are created with mode 0700; every file is written to a
// temporary file in the same directory and renamed (or hard-linked, when it
// must not replace an existing file) into place, so that a crash never
// leaves a half-written key or certificate under its final name.
package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Role is what a certificate's holder may do in the control plane.
type Role int

// The roles. The zero Role is invalid.
const (
	// Host is a server running a Bulkhead agent: it dials the controller
	// (TLS client) and may serve (TLS server).
	Host Role = iota + 1
	// Controller is a Bulkhead controller: it serves agents and operators
	// (TLS server) and dials other controllers (TLS client).
	Controller
	// Operator is a person or program using the operator API (TLS client
	// only).
	Operator
)

// URIScheme is the scheme of the URI subject alternative name that carries
// a certificate's role and name: bulkhead://ROLE/NAME.
const URIScheme = "bulkhead"

var roleNames = [...]string{Host: "host", Controller: "controller", Operator: "operator"}

// String returns the role's name as it appears in certificates ("host",
// "controller", "operator"), or "Role(N)" for an invalid role.
func (r Role) String() string {
	if r.valid() {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

func (r Role) valid() bool { return r >= Host && r <= Operator }

// ParseRole returns the role named s ("host", "controller" or "operator").
func ParseRole(s string) (Role, error) {
	for r := Host; r <= Operator; r++ {
		if roleNames[r] == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown role %q (want host, controller or operator)", s)
}

// extKeyUsage is what a certificate of the role may be used for.
func (r Role) extKeyUsage() []x509.ExtKeyUsage {
	switch r {
	case Host, Controller:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	case Operator:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	return nil
}

// MaxNameLen is the longest name a certificate may carry (the longest
// DNS name).
const MaxNameLen = 253

// MaxIssueNameLen is the longest name Issue accepts: NAME.key must fit the
// 255-byte limit of a file name on Linux file systems. Certificates with
// longer names (up to MaxNameLen) can still be supplied by an operator and
// used through Files.
const MaxIssueNameLen = 255 - len(".key")

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// caName is the base name of the CA's files; no certificate may take it.
const caName = "ca"

// checkName reports whether name can name a certificate holder (and its
// files): lowercase letters, digits, '-' and '.', starting and ending with a
// letter or digit, at most MaxNameLen characters; "ca" is the CA's own.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case len(name) > MaxNameLen:
		return fmt.Errorf("name %.20q... is %d characters long (at most %d)", name, len(name), MaxNameLen)
	case !nameRE.MatchString(name):
		return fmt.Errorf("invalid name %q: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit", name)
	case name == caName:
		return fmt.Errorf("name %q is reserved for the certificate authority's files", name)
	}
	return nil
}

// identityURI is bulkhead://ROLE/NAME.
func identityURI(r Role, name string) *url.URL {
	return &url.URL{Scheme: URIScheme, Host: r.String(), Path: "/" + name}
}

// CertIdentity returns the role and name a certificate carries in its one
// bulkhead://ROLE/NAME URI. A certificate with no such URI, or with more than
// one, is refused. It does not verify the certificate: use Identity on a
// handshake's state, whose chains the TLS stack verified.
func CertIdentity(cert *x509.Certificate) (Role, string, error) {
	var found []*url.URL
	for _, u := range cert.URIs {
		if strings.EqualFold(u.Scheme, URIScheme) {
			found = append(found, u)
		}
	}
	switch len(found) {
	case 0:
		return 0, "", fmt.Errorf("certificate %q carries no %s:// URI", cert.Subject.CommonName, URIScheme)
	case 1:
	default:
		return 0, "", fmt.Errorf("certificate %q carries %d %s:// URIs (want exactly one)", cert.Subject.CommonName, len(found), URIScheme)
	}
	u := found[0]
	if u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" {
		return 0, "", fmt.Errorf("certificate %q: malformed identity URI %q (want %s://ROLE/NAME)", cert.Subject.CommonName, u, URIScheme)
	}
	role, err := ParseRole(u.Host)
	if err != nil {
		return 0, "", fmt.Errorf("certificate %q: identity URI %q: %w", cert.Subject.CommonName, u, err)
	}
	name, ok := strings.CutPrefix(u.Path, "/")
	if !ok {
		return 0, "", fmt.Errorf("certificate %q: identity URI %q has no name", cert.Subject.CommonName, u)
	}
	if err := checkName(name); err != nil {
		return 0, "", fmt.Errorf("certificate %q: identity URI %q: %w", cert.Subject.CommonName, u, err)
	}
	return role, name, nil
}

// Identity returns who the peer of a TLS connection is: the role and name of
// its certificate, which the TLS stack must have verified against a CA (the
// configurations of this package always do). A connection whose peer sent
// no certificate, or whose certificate was not verified, is refused.
func Identity(state tls.ConnectionState) (Role, string, error) {
	if len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		if len(state.PeerCertificates) == 0 {
			return 0, "", errors.New("peer presented no certificate")
		}
		return 0, "", errors.New("peer certificate was not verified")
	}
	return CertIdentity(state.VerifiedChains[0][0])
}

// Require returns the name of the peer of a TLS connection if its verified
// certificate carries one of the roles want, and an error naming the role it
// does carry otherwise (e.g. a host's certificate where an operator's is
// required).
func Require(state tls.ConnectionState, want ...Role) (string, error) {
	role, name, err := Identity(state)
	if err != nil {
		return "", err
	}
	for _, w := range want {
		if role == w {
			return name, nil
		}
	}
	ws := make([]string, len(want))
	for i, w := range want {
		ws[i] = w.String()
	}
	return "", fmt.Errorf("peer %s/%s is not allowed here (want role %s)", role, name, strings.Join(ws, " or "))
}
