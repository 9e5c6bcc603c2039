// Package analysis holds the analyses that a per-tenant report does not
// give: the papers' tables read per phase, per pair or per reducer from
// simulations, sweeps of a network parameter across mechanisms, and
// large-scale analyses that run a mechanism's own code at
// tenant level on a datacenter far larger than a fluid simulation needs.
//
// Files: simulation.go runs a scenario through the simulator (the runner's
// pipeline) and reads its samples by window, pair and phase; elasticswitch.go
// builds the ElasticSwitch paper's tables from the shipped
// scenarios/elasticswitch-*.yaml (`bulkhead analyze elasticswitch`);
// loss.go sweeps the fraction of control messages lost over the mechanisms
// whose agents exchange messages (`bulkhead analyze loss`: a CSV, tables,
// and a figure per scenario drawn by report);
// qshare.go is QShare's large-scale analysis (§7.3, Table 1 and Fig. 10;
// `bulkhead bench qshare`): QShare's placement fills a fat-tree, then
// QShare's scores and tenant-queue binding (mech/qshare) run on it.
//
// Dependencies: analysis → {runner, sim, eval, report, place, topo, alloc, spec,
// mech/all, the mechanisms analysed}; cmd and mechanisms' tests import it.
package analysis
