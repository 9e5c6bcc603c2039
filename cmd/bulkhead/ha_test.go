package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkhead-dc/bulkhead/agentd"
	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/client"
	"github.com/bulkhead-dc/bulkhead/datapath"
	"github.com/bulkhead-dc/bulkhead/datapath/fake"
	"github.com/bulkhead-dc/bulkhead/internal/etcdtest"
	"github.com/bulkhead-dc/bulkhead/mech"
	"github.com/bulkhead-dc/bulkhead/mech/all"
	"github.com/bulkhead-dc/bulkhead/model"
	"github.com/bulkhead-dc/bulkhead/pki"
)

// haController is one `bulkhead controller --etcd` process.
type haController struct {
	api, agents string
	dataDir     string
	cmd         *exec.Cmd
	done        chan struct{}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startHAController(t *testing.T, pkiDir string, endpoints []string) *haController {
	t.Helper()
	c := &haController{api: freeAddr(t), agents: freeAddr(t), dataDir: t.TempDir(), done: make(chan struct{})}
	c.cmd = exec.Command(bin, "controller", "--data-dir", c.dataDir, "--pki", pkiDir, "--listen", c.api,
		"--agents-listen", c.agents, "--etcd", strings.Join(endpoints, ","))
	logf, err := os.Create(filepath.Join(c.dataDir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.cmd.Wait(); logf.Close(); close(c.done) }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(c.dataDir, "log"))
			t.Logf("controller %s log:\n%s", c.api, b)
		}
	})
	return c
}

// leads reads the controller's bulkhead_controller_leader gauge.
func (c *haController) leads() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+c.api+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "bulkhead_controller_leader 1" {
			return true
		}
	}
	return false
}

func (c *haController) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// TestControllersOnEtcd: three controllers on a three-member etcd
// cluster elect one leader; followers answer reads and send writes to
// it; when the leader is killed another leads within 5 s, nothing
// declared is lost, and agents follow the new leader.
func TestControllersOnEtcd(t *testing.T) {
	etcd := etcdtest.Start(t, 3)
	pkiDir := filepath.Join(t.TempDir(), "pki")
	if out, errOut, code := run(t, "", "controller", "init", "--pki", pkiDir, "--host", "s1", "--host", "s2"); code != 0 {
		t.Fatalf("init: %s%s", out, errOut)
	}
	var ctls []*haController
	for range 3 {
		ctls = append(ctls, startHAController(t, pkiDir, etcd.Endpoints()))
	}
	leader := func() (int, int) {
		n, who := 0, -1
		for i, c := range ctls {
			if c.alive() && c.leads() {
				n, who = n+1, i
			}
		}
		return n, who
	}
	var first int
	waitUntil(t, 30*time.Second, "one controller leads", func() bool {
		n, who := leader()
		first = who
		return n == 1
	})
	// Every controller wrote the cluster's one token.
	var token string
	waitUntil(t, 30*time.Second, "the token files", func() bool {
		var toks []string
		for _, c := range ctls {
			b, err := os.ReadFile(filepath.Join(c.dataDir, tokenFileName))
			if err != nil {
				return false
			}
			toks = append(toks, strings.TrimSpace(string(b)))
		}
		token = toks[0]
		return toks[0] != "" && toks[0] == toks[1] && toks[1] == toks[2]
	})
	// Apply through a follower: the client is sent to the leader.
	follower := (first + 1) % 3
	waitUntil(t, 30*time.Second, "the follower is ready", func() bool {
		resp, err := http.Get("http://" + ctls[follower].api + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b := make([]byte, 500)
		n, _ := resp.Body.Read(b)
		t.Logf("follower readyz: %d %s", resp.StatusCode, b[:n])
		return resp.StatusCode == 200
	})
	cli, err := client.New("http://"+ctls[follower].api, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	objs := haObjects(t)
	if _, err := cli.Apply(ctx, objs, false); err != nil {
		t.Fatalf("apply through a follower: %v", err)
	}

	// An agent given every controller's address finds the leader.
	var paths []*fake.Host
	tc, err := pki.ClientTLS(pkiDir, "s1")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, c := range ctls {
		addrs = append(addrs, strings.Replace(c.agents, "127.0.0.1", "localhost", 1))
	}
	d, err := agentd.New(agentd.Config{Host: "s1", Controllers: addrs, TLS: tc, Mechanism: all.New, ReportEvery: 200 * time.Millisecond,
		Path: func(*model.Model, mech.Mechanism) (datapath.Host, error) {
			p := fake.New(fake.Options{Limiters: true})
			paths = append(paths, p)
			return p, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	actx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); _ = d.Run(actx) }()
	defer func() { stopAgent(); <-agentDone }()
	connected := func(c *client.Client) bool {
		h, err := c.Get(ctx, api.KindHost, "s1")
		return err == nil && h.Status.(*api.HostStatus).Connected
	}
	leaderCli, _ := client.New("http://"+ctls[first].api, client.Options{Token: token})
	waitUntil(t, 10*time.Second, "the agent connects to the leader", func() bool { return connected(leaderCli) })

	// Kill the leader.
	if err := ctls[first].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ctls[first].done
	start := time.Now()
	var second int
	waitUntil(t, 10*time.Second, "another controller leads", func() bool {
		n, who := leader()
		second = who
		return n == 1
	})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("another controller led %v after the leader was killed, more than 5 s", took)
	} else {
		t.Logf("controller %d leads %v after controller %d was killed", second, took.Round(10*time.Millisecond), first)
	}
	newCli, _ := client.New("http://"+ctls[second].api, client.Options{Token: token})
	for _, o := range objs {
		if _, err := newCli.Get(ctx, o.Kind, o.Name()); err != nil {
			t.Errorf("%s %s lost with the leader: %v", o.Kind, o.Name(), err)
		}
	}
	waitUntil(t, 10*time.Second, "the agent follows the new leader", func() bool { return connected(newCli) })
	// The new leader takes writes, and they reach the agent.
	if _, err := newCli.Apply(ctx, []api.Object{haTenant("b", "b1")}, false); err != nil {
		t.Fatalf("apply to the new leader: %v", err)
	}
	waitUntil(t, 5*time.Second, "tenant b reaches the agent", func() bool {
		return len(paths) > 0 && slices.Contains(paths[len(paths)-1].Attached(), "b1")
	})
}

func waitUntil(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func haObjects(t *testing.T) []api.Object {
	t.Helper()
	doc := `apiVersion: bulkhead.dev/v1
kind: Cluster
metadata: {name: default}
spec:
  topology: {kind: two-tier, two_tier: {racks: 1, servers_per_rack: 2, edge: 1Gbps}}
  mechanism: {name: elasticswitch}
---
apiVersion: bulkhead.dev/v1
kind: Host
metadata: {name: s1}
spec: {address: 127.0.0.1, port: %d}
---
apiVersion: bulkhead.dev/v1
kind: Host
metadata: {name: s2}
spec: {address: 127.0.0.1, port: %d}
`
	l1, l2 := freeUDP(t), freeUDP(t)
	objs, err := api.Decode([]byte(fmt.Sprintf(doc, l1, l2)), "ha.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return append(objs, haTenant("a", "a1"))
}

func haTenant(name, vm string) api.Object {
	return api.Object{APIVersion: api.Version, Kind: api.KindTenant, Metadata: api.Meta{Name: name}, Spec: &api.TenantSpec{
		Guarantee: 100e6, VMs: []api.VMSpec{{Name: vm, Host: "s1", Addrs: []netipAddr{mustAddr(vm)}}, {Name: vm + "-peer", Host: "s2", Addrs: []netipAddr{mustAddr(vm + "-peer")}}}}}
}

func freeUDP(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

type netipAddr = netip.Addr

// mustAddr gives each test VM a distinct address from its name.
func mustAddr(name string) netip.Addr {
	h := 0
	for _, c := range name {
		h = h*31 + int(c)
	}
	return netip.AddrFrom4([4]byte{10, byte(h >> 16), byte(h >> 8), byte(h)})
}
