// Package proxy is Pulsar's rate enforcer (§4.4, §5) for appliances reached
// over TCP: a request-aware relay that puts every request a VM sends to an
// appliance through its flow's multi-resource token bucket, and measures
// the flows for the Pulsar controller (§4.2). Subpackages frame the
// protocols: resp (Redis, RESP2 and RESP3) and httpfs (HTTP/1.1 file
// stores). The proxy is a library; the daemon that accepts VMs' connections
// and talks to the controller wires it (New, Listen or Serve, Apply,
// Collect).
//
// # Flows
//
// A flow is every connection from one source VM to one appliance
// (mech.FlowID{Src: VM, Dst: appliance}); all of them share the flow's
// tokenbucket.Multi, one bucket per resource on the flow's path
// (Flow.Path: mech.PathElem with roles Forward, Reverse, Appliance). The
// caller names the flow of each connection (Serve's Flow, Listen's
// classify); the first connection of a flow creates it. Its allocation —
// tokens/s per path element, set at any time by SetAllocation (or Apply,
// from mech.ControllerActions), atomically for all its buckets — holds
// until changed; a flow never allocated runs at the default rate
// (Config.DefaultRate, SetDefault, per source VM or for all; 0 is
// unlimited, which the buckets run at Unlimited tokens/s).
//
// # Cost
//
// A request's cost is a vector over its flow's path, charged as the
// simulator does (sim: forward links carry the request's bytes, reverse
// links the response's, the appliance charges its virtual cost function of
// the request's type and size, model.VirtualCost.Cost):
//
//   - Forward links: the request's bytes on the wire.
//   - Reverse links: the reply's bytes on the wire.
//   - Appliance: Appliance.Cost(type, size) — ModelCost(model.Appliance, aliases)
//     is the model's cost function (Fig. 6(b) by default: 8000 tokens up
//     to 8 KB, the size beyond). The type is the Redis command's name in
//     lower case (first word only: "client setname" is "client"), or the
//     HTTP method in lower case ("get", "put"); the model's types are
//     lower case too, and aliases map the two ("set" → "put"). The size is
//     the payload: the request's argument bytes after the command name, or
//     its body, plus the reply's payload (the strings of a RESP reply, the
//     body of an HTTP response), so that a GET's size is the value it
//     reads and a SET's or PUT's the value it writes, as in the model.
//
// A request is charged what is known of it before its first byte is
// forwarded, and waits (in FIFO order with the flow's other requests; no
// drop, no reordering) until every bucket holds its tokens. What is known
// includes its expected reply: per request type, a moving average of the
// replies the flow has seen (the reverse links' bytes and the reply's
// payload in the appliance's cost), so that a request that waits or is
// outstanding counts on every element of its path — as the simulator's
// requests do, whose reply sizes it knows — and Pulsar's demand estimation
// sees what it needs on the reverse links too. A RESP bulk string counts
// from its header on, so "SET k <50 MB>" is charged whole before it
// streams; a request whose later arguments arrive after the buffer has
// filled is charged again, and waits again, for what they add. An HTTP
// request is charged its head and Content-Length, and a GET with a single
// closed Range the range's bytes on the reverse links and at the
// appliance. A chunked request body, whose length is not declared, is
// charged as it streams: each part (a buffer of at most 32 KiB, then the
// last chunk and the trailers) is charged its bytes on the wire, chunk
// framing included, and its payload before it is forwarded, and waits for
// them like a RESP request's later arguments — a body that never ends
// passes at its allocation, and the total is what its bytes and payload
// cost, as for a body of declared length. When the reply has passed, the
// request is settled: what it cost beyond its charge (a reply larger than
// expected) is charged as debt — a request with no bytes enters the flow's bucket
// queue, so later requests of the flow wait until the buckets have
// refilled it (the buckets' over-depth debt, see tokenbucket's package
// documentation, lets a request larger than a bucket's depth pass once the
// bucket is full) — and what it was charged beyond its cost (a reply
// smaller than expected or than its Range) is refunded to the buckets
// (tokenbucket.Multi.Refund).
//
// # Relay
//
// Each client connection has its own connection to the appliance and two
// goroutines: requests (client → appliance) and replies (appliance →
// client), with a bounded buffer each way (Config.BufferSize, 64 KiB, for
// each reader and writer; bodies and bulk strings stream through them, so
// a connection's memory does not depend on value sizes). A request waiting
// for tokens stops the reading of its connection, and so does
// Config.MaxInFlight requests forwarded and unanswered: TCP pushes back on
// the client. Connections block one another only through their flow's
// shared buckets (FIFO across the flow); flows are independent. A flow
// has at most Config.MaxConnsPerFlow connections at a time (1024): one
// beyond is closed at once, counted (Observation.Refused) and logged at
// most once per RefusalLogInterval. A connection on which nothing has
// moved for Config.IdleTimeout (10 minutes, real time) — no byte either
// way on either side, no request waiting for tokens — is closed, also
// one whose requests wait for replies that do not come (a client that
// blocks or subscribes for longer sends a PING meanwhile). Listen retries
// temporary Accept errors (out of file descriptors) with a backoff, as
// net/http does, and returns on others. Replies are matched to requests
// in order. A request the framer refuses (malformed,
// or beyond the limits: resp.Limits, httpfs.Limits) ends the connection
// after the replies to the earlier requests, with an error reply (RESP
// "-ERR ... at byte N ...", HTTP 400 or 431).
//
// # Unmatched replies
//
// A RESP reply that answers no request — a RESP3 push, a message to a
// subscriber or a monitor — is relayed without matching and charged its
// bytes on the reverse links as debt (nothing at the appliance: its work
// was charged to the request that caused it, a PUBLISH or a SUBSCRIBE);
// a connection has at most one such debt in its flow's queue, the bytes
// of the replies that pass meanwhile charged together after it. After
// (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE or MONITOR, Redis' replies no longer
// match requests one to one (several confirmations per request, or none
// but pushes under RESP3): the connection is in passthrough until it
// closes, its replies all unmatched. Its requests are still charged, and
// only those whose replies are themselves such messages are relayed:
// (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING and QUIT. Any other — an
// ordinary command after the last UNSUBSCRIBE, or under RESP3 (where
// Redis would answer it while subscribed), RESET or HELLO (which would let
// ordinary commands through) — is refused like a malformed request: an
// error reply, the connection closed, nothing forwarded; replies to the
// requests before it that the appliance had not sent yet may be lost, as
// the proxy cannot tell which those are. A client goes back to ordinary
// commands on a new connection. This keeps every reply to an ordinary
// request matched and charged exactly — its bytes, its payload in the
// appliance's cost of its request, its time outstanding — where charging
// passthrough replies as debt without refusing anything would charge the
// reverse links only: the appliance's cost is a function of a request's
// and its reply's sizes together, and a reply the proxy cannot match to a
// request has neither a request nor a time outstanding. For the same
// reason CLIENT REPLY (OFF and SKIP leave requests unanswered, outstanding
// for good) and the replication commands SYNC, PSYNC and REPLCONF (a
// stream the proxy cannot frame, and REPLCONF ACK, which Redis does not
// answer) are refused on every connection; other CLIENT subcommands pass
// (resp.Segment.Sub names the subcommand).
//
// # Statistics
//
// Collect returns, per flow and in the controller's shape (mech.FlowObs),
// Pulsar §4.2's vectors over the period since the previous Collect: Used
// (tokens/s let through, debts included), Backlog (tokens queued at the
// end), Queued (time average of the tokens queued at the buckets) and
// Outstanding (time average of the tokens of requests forwarded and not
// answered). Pulsar samples the last two every 10 ms; the proxy integrates
// them exactly over time instead (the samples' mean converges to it), so
// no timer runs. Per appliance (ApplianceStats, §4.3): the throughput in
// tokens/s of the requests answered and the time average of the requests
// outstanding. A queued request holds its connection's reading, so the
// backlog counts at most one request per connection (plus debts): the rest
// wait unread in the client's socket.
//
// The accounting is cheap on the common path: a request the buckets let
// through at once (tokenbucket.Multi.TryTake) costs one allocation, its
// exchange (cost vectors live on the stack or in the exchange for paths of
// up to 8 elements), two clock reads and two acquisitions of its flow's
// lock (admitted, answered); a ticket and a queued copy of its cost are
// made only when it must wait. The appliance's statistics are kept per
// flow under that lock and summed by Collect.
//
// All time comes from Config.Clock (a tokenbucket.TimerClock): tests drive
// the buckets and the statistics with a tokenbucket.FakeClock.
package proxy
