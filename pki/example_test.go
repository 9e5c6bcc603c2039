package pki_test

import (
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/bulkhead-dc/bulkhead/pki"
)

// The files `bulkhead controller init` makes: a CA, a controller's
// certificate for the address agents dial, a host's and an operator's; and
// the TLS configurations each side builds from them.
func Example() {
	tmp, err := os.MkdirTemp("", "pki-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "pki")

	if err := pki.InitCA(dir, "example CA"); err != nil {
		log.Fatal(err)
	}
	for _, r := range []pki.Request{
		{Name: "controller-1", Role: pki.Controller, DNS: []string{"controller.example"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}},
		{Name: "server-1", Role: pki.Host},
		{Name: "alice", Role: pki.Operator},
	} {
		cert, key, err := pki.Issue(dir, r)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Role, filepath.Base(cert), filepath.Base(key))
	}
	// A CA is never overwritten.
	err = pki.InitCA(dir, "again")
	fmt.Println(strings.TrimPrefix(err.Error(), "init CA: "+dir+"/"))

	server, err := pki.ServerTLS(dir, "controller-1") // the controller serves agents and operators
	if err != nil {
		log.Fatal(err)
	}
	agent, err := pki.ClientTLS(dir, "server-1") // an agent dials the controller
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(server.ClientAuth, agent.MinVersion == server.MinVersion)
	// In the server's handlers: name, err := pki.Require(conn.ConnectionState(), pki.Host)

	// Output:
	// controller controller-1.crt controller-1.key
	// host server-1.crt server-1.key
	// operator alice.crt alice.key
	// ca.key already exists; refusing to overwrite a CA
	// RequireAndVerifyClientCert true
}
