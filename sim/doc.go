// Package sim is Bulkhead's fluid simulator.
//
// Time advances in ticks of dt. Every transport connection has a path of
// resources: the physical links its route crosses (each direction of a
// full-duplex link is its own resource) and, in front of them, the virtual
// resources that enforcement creates — a VM pair's egress limiter, a VM's
// egress limiter — and behind them a VM's ingress limiter, each with its
// current rate as capacity.
//
// Physics per tick:
//  1. Unresponsive UDP sends at its offered rate. Where UDP arrives at a
//     resource faster than its capacity, each UDP connection keeps a share
//     proportional to its arrival rate (drop-tail), hop by hop along the path.
//  2. TCP connections share what UDP leaves by weighted max-min with one
//     unit of weight per connection (so more connections grab more),
//     limited by their application rate if they have one. One solver
//     (alloc.Solver) serves this physics and the policies.
//  3. A resource is saturated when its load reaches its capacity. A
//     saturated link is congested — its queue overflows — when traffic that
//     is not held back upstream pushes into it (a TCP connection not bound
//     by its own limiter, a request flow not bound by its enforcer, UDP
//     dropped there). Every pair crossing a congested link sees losses,
//     limiter-bound or not, as drop-tail drops whatever arrives: a fraction
//     (Options.TCPLoss) of the packets it sends, plus for UDP the bits
//     actually dropped. A link filled exactly by limiter-bound traffic is
//     loss-free. Hosts count whole packets: a pair's lost (and ECN-marked)
//     packets accumulate and its agents see each one when it is complete,
//     so a 10 Mbps pair through a queue losing 1% sees a loss about every
//     eighth 15 ms period while a 300 Mbps pair sees several in each — as
//     on real hosts, where slow pairs through a shared queue raise their
//     limits between rare losses. Each pair starts at its own phase of its
//     packet stream (a hash of the pair), so equal pairs do not lose in
//     lockstep.
//
// Mechanisms run as mech.Agent values, one per server, stepped at their own
// period with what the host would measure (per-pair rates, limits, losses)
// and the control messages peers sent them; their limits take effect at the
// next tick. The agents due in a tick all observe the tick just simulated
// (a pair's limit is the one in force in it) before their settings are
// applied, host by host, so agents of a mech.Concurrent mechanism step in
// parallel (Options.Workers) with the same results. The run is
// deterministic for a scenario seed.
package sim
