package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/bulkhead-dc/bulkhead/internal/etcdtest"
)

func ended(ctx context.Context, within time.Duration) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(within):
		return false
	}
}

func TestBoltElector(t *testing.T) {
	b, err := OpenBolt(filepath.Join(t.TempDir(), "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := ctxT(t)
	leader := func(want string) {
		t.Helper()
		if got, err := b.Leader(ctx); err != nil || got != want {
			t.Fatalf("leader %q (%v), want %q", got, err, want)
		}
	}
	leader("")
	type step struct {
		name string
		end  func(cancel context.CancelFunc) // ends the leadership
	}
	steps := []step{
		{"resign", func(context.CancelFunc) {
			if err := b.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"campaign context ends", func(cancel context.CancelFunc) { cancel() }},
		{"close", func(context.CancelFunc) {
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, st := range steps {
		cctx, cancel := context.WithCancel(ctx)
		start := time.Now()
		lctx, err := b.Campaign(cctx, "https://c0:8443")
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: campaign took %v; the owner of the file leads at once", st.name, d)
		}
		leader("https://c0:8443")
		st.end(cancel)
		if !ended(lctx, time.Second) {
			t.Fatalf("%s: the leadership context did not end", st.name)
		}
		if st.name != "close" {
			leader("")
		}
		cancel()
	}
	if _, err := b.Campaign(ctx, "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("campaign on a closed store: %v, want ErrClosed", err)
	}
}

// TestBoltLocked: a second opener of the file, in another process or in
// this one, gets ErrLocked naming the file after the timeout.
func TestBoltLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	holders := []struct {
		name string
		hold func(t *testing.T) (release func())
	}{
		{"same process", func(t *testing.T) func() {
			b, err := OpenBolt(path, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			return func() { _ = b.Close() }
		}},
		{"another process", func(t *testing.T) func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHoldBoltHelper$")
			cmd.Env = append(os.Environ(), "BULKHEAD_STORE_HOLD="+path)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "held" {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("helper process: %q, %v", line, err)
			}
			return func() {
				_ = stdin.Close()
				_ = cmd.Wait()
			}
		}},
	}
	for _, h := range holders {
		t.Run(strings.ReplaceAll(h.name, " ", "_"), func(t *testing.T) {
			release := h.hold(t)
			const timeout = 200 * time.Millisecond
			start := time.Now()
			b, err := OpenBolt(path, timeout)
			waited := time.Since(start)
			if err == nil {
				_ = b.Close()
				release()
				t.Fatal("opened a file another holder has open")
			}
			if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q: want ErrLocked naming %s", err, path)
			}
			// bbolt retries the lock every 50 ms and gives up when
			// the next retry would pass the timeout.
			if waited < timeout-50*time.Millisecond {
				t.Errorf("gave up after %v, before the timeout %v", waited, timeout)
			}
			release()
			b, err = OpenBolt(path, time.Second)
			if err != nil {
				t.Fatalf("open after the holder let go: %v", err)
			}
			_ = b.Close()
		})
	}
}

// TestHoldBoltHelper is the other process of TestBoltLocked: it holds the
// file named in BULKHEAD_STORE_HOLD until its stdin closes.
func TestHoldBoltHelper(t *testing.T) {
	path := os.Getenv("BULKHEAD_STORE_HOLD")
	if path == "" {
		return // run only as TestBoltLocked's helper process
	}
	b, err := OpenBolt(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("held")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	_ = b.Close()
}

// campaignHelperEnv names the etcd endpoints, prefix and id for
// TestCampaignHelper, separated by spaces.
const campaignHelperEnv = "BULKHEAD_STORE_CAMPAIGN"

// TestCampaignHelper is a controller in another process for
// TestEtcdElection: it campaigns, prints "leading" and waits to be killed.
func TestCampaignHelper(t *testing.T) {
	args := strings.Fields(os.Getenv(campaignHelperEnv))
	if len(args) != 3 {
		return // run only as TestEtcdElection's helper process
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := OpenEtcd(ctx, EtcdConfig{Endpoints: strings.Split(args[0], ","), Prefix: args[1]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(ctx, args[2]); err != nil {
		t.Fatal(err)
	}
	fmt.Println("leading")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// startLeaderProcess starts TestCampaignHelper and waits until it leads.
func startLeaderProcess(t *testing.T, endpoints []string, prefix, id string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCampaignHelper$")
	cmd.Env = append(os.Environ(), campaignHelperEnv+"="+strings.Join(endpoints, ",")+" "+prefix+" "+id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		if strings.TrimSpace(l) != "leading" {
			t.Fatalf("leader process: %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the leader process does not lead within 10 s")
	}
	return cmd
}

// TestEtcdElection: controllers on a three-member etcd cluster. One leads;
// the leader's process killed (SIGKILL, so it does not resign), Resign,
// and the end of the campaign's context each hand leadership over to
// another, within 5 s.
func TestEtcdElection(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 3)
	const n, prefix = 3, "/elect/"
	stores := make([]*Etcd, n)
	ids := make([]string, n)
	for i := range stores {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		e, err := OpenEtcd(ctx, EtcdConfig{Endpoints: c.Endpoints(), Prefix: prefix})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		stores[i] = e
		ids[i] = fmt.Sprintf("https://controller-%d:8443", i)
	}
	type won struct {
		i    int
		lctx context.Context
		err  error
	}
	results := make(chan won, n)
	cancels := make([]context.CancelFunc, n)
	// campaign runs controller i's campaign, again when its session is
	// lost (what the controller does).
	campaign := func(i int) {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		go func() {
			for {
				lctx, err := stores[i].Campaign(ctx, ids[i])
				if errors.Is(err, ErrSessionLost) {
					t.Logf("controller %d: %v; campaigning again", i, err)
					continue
				}
				results <- won{i, lctx, err}
				return
			}
		}()
	}
	t.Cleanup(func() {
		for _, cancel := range cancels {
			if cancel != nil {
				cancel()
			}
		}
	})
	// next waits for the next controller to lead, within 5 s of since.
	next := func(since time.Time, what string) won {
		t.Helper()
		select {
		case w := <-results:
			if w.err != nil {
				t.Fatalf("%s: controller %d: %v", what, w.i, w.err)
			}
			t.Logf("%s: controller %d leads after %v", what, w.i, time.Since(since).Round(time.Millisecond))
			return w
		case <-time.After(5*time.Second - time.Since(since)):
			t.Fatalf("%s: nobody leads within 5 s", what)
		}
		panic("unreachable")
	}
	// agree checks that every live store names the same leader and that
	// nobody else returned from Campaign.
	agree := func(what string, want string, live ...int) {
		t.Helper()
		for _, i := range live {
			got, err := stores[i].Leader(ctxT(t))
			if err != nil || got != want {
				t.Errorf("%s: controller %d sees leader %q (%v), want %q", what, i, got, err, want)
			}
		}
		select {
		case w := <-results:
			t.Fatalf("%s: controller %d leads too (err %v)", what, w.i, w.err)
		case <-time.After(300 * time.Millisecond):
		}
	}
	all := []int{0, 1, 2}

	if got, err := stores[0].Leader(ctxT(t)); err != nil || got != "" {
		t.Fatalf("leader before any campaign: %q, %v", got, err)
	}
	// A controller in another process leads; the others wait.
	const processID = "https://controller-p:8443"
	proc := startLeaderProcess(t, c.Endpoints(), prefix, processID)
	for i := range stores {
		campaign(i)
	}
	agree("the process leads", processID, all...)

	// The leader's process is killed: its lease expires, another leads.
	start := time.Now()
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first := next(start, "after the leader process was killed")
	agree("after the leader process was killed", ids[first.i], all...)

	// Resign hands over.
	start = time.Now()
	if err := stores[first.i].Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !ended(first.lctx, time.Second) {
		t.Fatal("the resigned leader's context did not end")
	}
	second := next(start, "after Resign")
	if second.i == first.i {
		t.Fatal("the resigned controller leads again")
	}
	agree("after Resign", ids[second.i], all...)
	campaign(first.i) // back in the queue

	// The end of the campaign's context hands over.
	start = time.Now()
	cancels[second.i]()
	if !ended(second.lctx, time.Second) {
		t.Fatal("the leader's context did not end with its campaign's")
	}
	third := next(start, "after the campaign's context ended")
	if third.i == second.i {
		t.Fatal("the cancelled controller leads again")
	}
	agree("after the campaign's context ended", ids[third.i], all...)

	// One campaign at a time per store.
	if _, err := stores[third.i].Campaign(ctxT(t), "again"); err == nil {
		t.Error("a second campaign of the leading store was accepted")
	}
	// Closing a store ends its waiting campaign with ErrClosed; closing
	// the leader's resigns: nobody leads.
	waiting := 3 - second.i - third.i
	if err := stores[waiting].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-results:
		if w.i != waiting || !errors.Is(w.err, ErrClosed) {
			t.Errorf("controller %d's campaign ended with %v, want controller %d's with ErrClosed", w.i, w.err, waiting)
		}
	case <-time.After(time.Second):
		t.Fatalf("closing controller %d did not end its campaign", waiting)
	}
	if err := stores[third.i].Close(); err != nil {
		t.Fatal(err)
	}
	if !ended(third.lctx, time.Second) {
		t.Fatal("the leader's context did not end when its store closed")
	}
	if got, err := stores[second.i].Leader(ctxT(t)); err != nil || got != "" {
		t.Errorf("leader after the others closed: %q (%v), want none", got, err)
	}
}

// raftLeader makes member want the etcd cluster's raft leader (lead) or
// not (!lead), and returns the member that leads.
func raftLeader(t *testing.T, c *etcdtest.Cluster, want int, lead bool) int {
	t.Helper()
	ctx := ctxT(t)
	ids := make([]uint64, c.Size())
	var leaderID uint64
	for i := range ids {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Endpoint(i)}, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		st, err := cli.Status(ctx, c.Endpoint(i))
		_ = cli.Close()
		if err != nil {
			t.Fatal(err)
		}
		ids[i], leaderID = st.Header.MemberId, st.Leader
	}
	leader := slices.Index(ids, leaderID)
	target := -1
	switch {
	case lead && leader != want:
		target = want
	case !lead && leader == want:
		target = (want + 1) % c.Size()
	}
	if target >= 0 {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Endpoint(leader)}, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cli.MoveLeader(ctx, ids[target])
		_ = cli.Close()
		if err != nil {
			t.Fatalf("move the raft leadership from member %d to %d: %v", leader, target, err)
		}
		leader = target
	}
	return leader
}

// TestEtcdElectionMemberLost: each controller talks to one etcd member;
// the leading controller's member is killed, so its lease is no longer
// refreshed. The controller must notice it no longer leads within the
// session TTL plus etcd's client-side check (500 ms) and the 500 ms
// margin below; another leads after the lease expires on the cluster.
// When the killed member was also the raft leader, etcd first elects a new
// raft leader (up to twice the 1 s election timeout) and then extends
// every lease by the election timeout (etcd's lessor.Promote), so the
// bound for another controller to lead is 2 s + TTL + 1 s + 500 ms (etcd's
// expiry check) + 500 ms of margin = 6 s; with a follower member it is the
// 5 s target.
func TestEtcdElectionMemberLost(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cases := []struct {
		name       string
		raftLeader bool
		handover   time.Duration
	}{
		{"member is a raft follower", false, 5 * time.Second},
		{"member is the raft leader", true, 6 * time.Second},
	}
	const noticeBound = DefaultSessionTTL + time.Second
	for ci, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			n := c.Size()
			stores := make([]*Etcd, n)
			for i := range stores {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				e, err := OpenEtcd(ctx, EtcdConfig{Endpoints: []string{c.Endpoint(i)}, Prefix: fmt.Sprintf("/lost%d/", ci)})
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = e.Close() })
				stores[i] = e
			}
			type won struct {
				i    int
				lctx context.Context
				err  error
			}
			results := make(chan won, n)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			for i := range stores {
				go func() {
					for {
						lctx, err := stores[i].Campaign(ctx, fmt.Sprint("controller-", i))
						if errors.Is(err, ErrSessionLost) && ctx.Err() == nil {
							// While etcd elects a new raft leader,
							// sessions on the other members can lapse too.
							t.Logf("controller %d: %v; campaigning again", i, err)
							continue
						}
						results <- won{i, lctx, err}
						return
					}
				}()
			}
			first := <-results
			if first.err != nil {
				t.Fatal(first.err)
			}
			raftLeader(t, c, first.i, tc.raftLeader)
			start := time.Now()
			c.Kill(first.i)
			if !ended(first.lctx, noticeBound) {
				t.Fatalf("the leader did not notice its loss within %v", noticeBound)
			}
			t.Logf("the leader noticed it lost the cluster after %v", time.Since(start).Round(time.Millisecond))
			select {
			case w := <-results:
				if w.err != nil {
					t.Fatal(w.err)
				}
				t.Logf("controller %d leads after %v", w.i, time.Since(start).Round(time.Millisecond))
			case <-time.After(tc.handover - time.Since(start)):
				t.Fatalf("nobody leads within %v", tc.handover)
			}
			if err := c.Restart(first.i); err != nil {
				t.Fatal(err)
			}
		})
	}
}
