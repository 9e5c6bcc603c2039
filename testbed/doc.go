// Package testbed emulates a scenario's datacenter on one Linux machine
// and runs its workloads on real traffic (`bulkhead testbed`).
//
// # Layout
//
// From the same scenario and topology as the simulator (spec.Load,
// topo.FromSpec), Up creates:
//
//   - one network namespace per server (the hypervisor, PREFIX-n-SERVER)
//     and per switch (PREFIX-n-SWITCH), both routing (ip_forward);
//   - one per VM (PREFIX-v-VM) behind its server, joined to it by a veth
//     pair (PREFIX vI in the VM, PREFIX vIh in the server);
//   - one veth pair per physical link (PREFIX lJa / lJb), each direction
//     shaped by HTB at the link's capacity × Scale (class 1:1) with a
//     drop-tail byte FIFO of QueueBytes (10:) — the emulated switch port or
//     NIC;
//   - static routes so that every declared VM pair follows the route the
//     simulator and admission control give it (topo.Route with
//     topo.PairHash), with policy rules where pairs toward one VM diverge
//     (ECMP on fat-trees);
//   - on the server side of every VM that receives a declared pair, an
//     HTB with an unlimited class per pair: the receive counters the
//     measurements come from;
//   - with Limiters (mechanisms whose agents set pair limits), on the
//     interface of every VM that sends a declared pair, a
//     dataplane.Limiter with a class per pair: the pair limiters a host
//     agent sets. They sit on the emulated vNIC's transmit queue, so TCP
//     in the VM is held back by its small-queue budget (set to
//     VMTSQBytes in the VMs) instead of losing packets to the limiter —
//     the backpressure a real vNIC gives — and the losses its
//     connections see are the network's;
//   - with Schedulers (mechanisms whose agents install per-VM
//     schedulers), two IFBs per server with VMs:
//     PREFIXtx receives by mirred redirection everything the server's VMs
//     send, PREFIXrx everything arriving on its links (one redirection
//     filter per local VM, whose counters are the VM's arrivals, and one
//     for the rest). The agents install per-VM HTB schedulers on them;
//   - a control address per server with VMs (CtlNet, on its loopback),
//     routed along the topology: the host agents' UDP messages travel in
//     band, through the emulated links and queues;
//   - one namespace per appliance (PREFIX-a-APPLIANCE) behind its server,
//     joined by a veth pair (PREFIX aI / aIh) like a VM, with the /31
//     ApplianceNet+2i / +2i+1 and routes in every node along the routes
//     the simulator gives the request flows (requests VM → appliance and
//     replies back, ECMP included). Run starts the appliance's real server
//     there: redis-server for model kv (RedisPort), nginx with WebDAV PUT
//     for filestore (HTTPPort); encryption, hypervisor and custom
//     appliances are refused (appliances.go).
//
// Addresses are in Network (10.200.0.0/16): VM i is 10.200.0.0+2i+1/31
// (its server's side +2i), physical link j 10.200.128.0+2j/31; server
// control addresses are in CtlNet (10.201.0.0/16), appliance i is
// 10.202.0.0+2i+1/31 (ApplianceNet). They exist only inside
// the run's namespaces; nothing is created in the caller's namespace, and
// no route of the host is touched.
//
// # Mechanisms and workloads
//
// Run starts one host agent (package agent) per server with VMs, as
// goroutines of its process, each on its server's data path
// (datapath/linux over the testbed's limiters, IFBs and links; its
// socket opened in the server's namespace), running
// the mechanism through mech/all — any whose needs host agents meet
// (mech.Capabilities.RealTraffic: no switch queues, VMs' demands or
// controller faster than agents report; a central controller only through
// the control plane, `testbed run`); its declared capabilities say which data
// plane to build and whether it needs a loss counter. `bulkhead agent`
// runs the same agent as a process against a testbed that is up
// (AttachAgent). Flows run as iperf3 clients and servers (one process
// each) or, with RunOptions.Workload "builtin", in the built-in generator
// (gen.go): goroutines with sockets opened in the VMs' namespaces, TCP
// senders writing as fast as they can, UDP at the flow's rate with
// segmentation offload (one send per 16 datagrams), and short flows
// (kind flows) whose completion times go to the report. Requests
// workloads run in the request generator (package loadgen; or
// redis-benchmark, RunOptions.RequestClient) in the source VMs'
// namespaces, against the appliances' real servers, which the run
// declares to the controller with their endpoints (Appliance.Address,
// Port, Protocol).
//
// # Measurements
//
// Run samples every declared pair's received bytes every sample interval
// (default: the scenario's, at least 100 ms) and builds the same
// eval.Input as the simulator, so eval.Evaluate and WriteReport give
// the same report. Rates are link-layer (Ethernet frame) bits/s — the unit
// the shapers use — divided by Scale: the scenario's units. iperf3's
// goodput is about 5% lower (headers). Demands are the workloads' (+Inf for
// bulk TCP, the rate for UDP), as in the simulator. Every request flow's
// completed requests/s and tokens/s (the appliance's virtual cost of each
// request's type and size) and every appliance's utilization (its server's
// CPU time over the interval) and capacity for the mix it served (tokens
// ÷ busy time) go to the same samples as the simulator's.
//
// # Cleanup
//
// Every object carries the run prefix: namespaces and links by name,
// processes through dataplane.EnvRun in their environment (and they are
// found by namespace too); the appliances' files (configuration, logs,
// data) under StateDir/PREFIX.a. A state file (StateDir/PREFIX.json) is written
// before the first object is created. Down(prefix) kills the processes,
// deletes the namespaces — which destroys their devices, qdiscs, classes
// and filters — and checks that nothing is left. Up removes everything
// when it fails or its context is cancelled; Run tears down on return,
// including on error and cancellation (the command cancels on SIGINT,
// SIGTERM and SIGHUP). Processes are started with PR_SET_PDEATHSIG, so a
// run killed with SIGKILL leaves only namespaces, which `testbed down` (or
// ReapStale, for runs whose owner process died) removes.
//
// # Requirements
//
// Root, and iperf3 (Debian's package) for workloads; redis-server and
// nginx for scenarios with kv and filestore appliances (redis-tools for
// RequestRedisBenchmark). The kernels here have
// HTB, TBF, ingress/clsact, u32, cls_bpf, mirred and IFB, and no gact,
// police, fq, netem, RED or fq_codel: counting is done with HTB classes.
// Two cores forward 1 Gbit/s links with a few TCP flows comfortably
// (Scale 1); larger scenarios may need a smaller Scale.
package testbed
