// Package dataplane is Bulkhead's Linux enforcement layer: network
// namespaces, veth and IFB devices, addresses and routes, HTB qdiscs and
// classes, u32 classifiers, ingress redirection to IFB devices, and counters
// per class and per classifier, all through netlink
// (github.com/vishvananda/netlink). Nothing here runs the tc or ip commands.
//
// The pieces a host agent uses are:
//
//   - Limiter: an HTB tree on one device (typically an IFB that receives
//     everything a host's VMs send) with one class per VM pair, classified by
//     u32 on the pair's IP source and destination. SetPairRate is one
//     netlink class change once the pair's class exists.
//     A Limiter whose pairs are all unlimited is a per-pair counter (the
//     kernels here have no gact or police action to count with).
//   - NS: a named network namespace (/run/netns/NAME, visible to
//     `ip netns`) with a netlink handle bound to it, and Do to run code
//     (including starting processes) inside it.
//
// Cleanup is by name prefix: every namespace, link and process a run
// creates carries the run's prefix (namespaces and links by name, processes
// through the environment variable EnvRun), and Cleanup(prefix) kills the
// processes and deletes the namespaces, which removes the devices, qdiscs,
// classes and filters inside them. It works from any process, so a run that
// was killed is removed by the next `bulkhead testbed down`.
//
// Everything here needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); RequireRoot
// says so clearly.
package dataplane
