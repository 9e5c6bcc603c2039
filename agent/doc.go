// Package agent is Bulkhead's host agent: the real-traffic driver of a
// mechanism's per-host mech.Agent, the counterpart of the simulator's
// engine. One agent runs per server (hypervisor); every mechanism period
// it
//
//  1. reads the server's counters into a mech.HostObs (obs.go): per VM
//     pair the bytes its limiter class sent (dataplane.Limiter on the
//     source VM's interface) and the bytes delivered into the destination
//     VM (counting classes on its veth), whether the pair's limiter held
//     it back (a limited class with a backlog, overlimits or drops in the
//     period), the losses of a LossCounter, and per VM its sent and
//     received rates and, with an ingress scheduler, its drops;
//  2. steps the mechanism (the same mech/elasticswitch, mech/gatekeeper,
//     mech/static or mech/none code as the simulator, built by mech/all)
//     with the observation and the messages received since the last step;
//  3. applies the Limits it returns — pair limits as HTB class rate
//     changes (dataplane.Limiter.SetPairRate, one netlink request), VM
//     egress and ingress limits and mech.Scheduler settings as per-VM HTB
//     trees on the server's IFBs (Scheduler);
//  4. sends its Messages to the other agents over UDP (wire.go): one JSON
//     envelope per datagram with a format version, sender, recipient,
//     sender epoch and sequence number, and the mechanism's body. A
//     datagram that is malformed, of another version, from an unknown
//     sender or address, for another host, with a body that is not an
//     object with a valid kind, not newer than the last one accepted from
//     its sender, or beyond a full inbox is counted by reason
//     (bulkhead_agent_messages_dropped_total) and dropped; nothing a peer
//     sends can stop the agent.
//
// Rates on the wire are Scale × the scenario's units; the mechanism works
// in the scenario's units.
//
// It logs with log/slog, and with Config.HTTP serves Prometheus metrics
// (its own registry: steps, step time, limiter updates and their latency,
// messages sent, received and dropped, per-pair rates and limits) at
// /metrics, its latest observation and limits as JSON at /state, and
// /healthz. Run ends cleanly when its context is cancelled (socket, HTTP
// server, loss counter closed; with Config.Restore its limits removed).
//
// # Losses
//
// LossCounter is the seam for per-pair loss detection. SeqGaps is
// ElasticSwitch §6's: eBPF programs (dataplane/seqloss) stamp a per-pair
// sequence number in the IP ID of every packet leaving the server on its
// uplinks and count the gaps at the receivers' veths; it sees TCP and UDP
// losses in the network (not the pair limiters' own), at the destination
// (AtDestination), so ElasticSwitch runs with congestion: receiver and
// the destination's agent feeds the losses back to the source's. The
// testbed uses it by default for ElasticSwitch and Seawall (testbed.LossSeq).
// TCPRetransmits reads the sender VMs' TCP retransmissions through
// sock_diag instead (testbed.LossTCP); it sees no UDP losses.
//
// # Where agents run
//
// The testbed (testbed.Run, `bulkhead testbed run`) runs one agent per
// server as goroutines of its own process, each bound to its server's
// namespace (netlink handles and UDP socket opened inside it), sharing the
// testbed's limiters. `bulkhead agent` runs the same Agent as a process
// for one server of a testbed that is up (testbed.AttachAgent), e.g. under
// `ip netns exec`; it then creates the server's limiters itself.
package agent
