// Package agent is Bulkhead's host agent: the real-traffic driver of a
// mechanism's per-host mech.Agent, the counterpart of the simulator's
// engine. One agent runs per server (hypervisor). It is configured from
// the declared model (model.Model: tenants, VMs with their hosts,
// addresses, devices and guarantees), its host's name, its peers and a
// data path (datapath.Host); every mechanism period it
//
//  1. reads the server's counters through the data path into a
//     mech.HostObs (obs.go): per VM pair the bytes its limiter sent and
//     the bytes delivered into the destination VM, whether the pair's
//     limiter held it back (a limited queue with a backlog, overlimits or
//     drops in the period), the losses of the loss counter on the side it
//     sees them, and per VM its sent and received rates and, with an
//     ingress scheduler, its drops;
//  2. steps the mechanism through the driver core (drive.Host) with the
//     observation and the messages received since the last step; the
//     core checks the limits and schedulers it returns and applies them
//     through the agent's enforcer (enforce.go: pair limits on the source
//     VM's pair limiter, VM limits and schedulers on the server's per-VM
//     schedulers, rates × Scale), keeps them as desired state and
//     re-applies, at the next step, every setting the data path refused
//     or lost (a queue or scheduler missing from the counters, or not at
//     the rate asked for, as the data path holds it: datapath.Held);
//     one still not held after 5 consecutive re-applies is reported once
//     (a warning, bulkhead_agent_unheld_total);
//  3. sends the mechanism's messages to the other agents over UDP
//     (wire.go): one JSON envelope per datagram with a format version,
//     sender, recipient, sender epoch, sequence number and send time, and
//     the mechanism's body, followed by an HMAC-SHA256 tag over the
//     envelope's bytes under the key the two hosts share (package
//     wireauth; Config.Keys). A datagram from an address that is no peer
//     agent's (checked first, before the datagram is read: a flood from a
//     VM costs a map lookup per datagram, no parsing, no hashing), or
//     that is malformed, of another version, from a sender other than the
//     peer at its address, without a tag that verifies under its claimed
//     sender's key, for another host, with a body that is not an object
//     with a valid kind, not newer than the last one accepted from its
//     sender (checked only once the tag verifies: no one without the key
//     can move a sender's sequence), starting its sender's sequence (the
//     first since the receiver started or forgot the sender, or of a
//     newer epoch) but sent more than MaxMessageAge before the receiver's
//     clock (a datagram captured earlier, replayed to a restarted
//     receiver), with an epoch or sequence its sender's clock cannot have
//     reached (later than the receiver's clock plus MaxClockSkew, or more
//     messages than MaxSendRate since its epoch: even a key holder cannot
//     lock a peer out), or beyond a full inbox is counted by reason
//     (bulkhead_agent_messages_dropped_total) and dropped; nothing a peer
//     sends can stop the agent.
//
// Steps are paced by drive.Pacer. Update hands a new model to the
// mechanism between two steps (tenants and VMs added or removed, the
// host's new VMs attached to the data path — a VM the data path cannot
// enforce refuses the update —, those that left detached and their
// limits removed, a VM whose address or device changed attached anew and
// its pairs' limits moved to the new addresses; a limiter the data path
// refuses to remove is reported and retried every step), for mechanisms
// whose agents take one (mech.Capabilities.LiveTenants). Apply steps a mechanism once and
// leaves what it set (a reservation mechanism's limits) without an agent
// running.
//
// Rates on the data path are Scale × the model's units; the mechanism
// works in the model's units.
//
// It logs with log/slog, and with Config.HTTP serves Prometheus metrics
// (its own registry: steps, step time, limiter updates and their latency,
// writes, failures and retries of the driver core, settings not held,
// messages sent, received and dropped, per-pair rates and limits) at
// /metrics, its latest observation and limits as JSON at /state, and
// /healthz. Run ends cleanly when its context is cancelled (socket, HTTP
// server, data path closed; with Config.Restore its limits and
// schedulers removed).
//
// The agent knows no mechanism and no Linux: the data path is an
// interface (package datapath; datapath/linux on servers, datapath/fake
// in tests), the socket comes from Config.Listen (the testbed opens it
// inside the server's namespace; tests on the loopback interface).
//
// # Where agents run
//
// The testbed (testbed.Run, `bulkhead testbed run`) runs one agent per
// server as goroutines of its own process, each on its server's data path
// (datapath/linux over the testbed's limiters, socket opened inside the
// server's namespace). `bulkhead agent` runs the same Agent as a process
// for one server of a testbed that is up (testbed.AttachAgent), e.g.
// under `ip netns exec`; it then creates the server's limiters itself.
package agent
