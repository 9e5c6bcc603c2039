// Package analysis holds the papers' analyses that are not simulations:
// they run a mechanism's own code on a datacenter far larger than a fluid
// simulation needs, at the level of detail the paper's own analysis had,
// and `bulkhead bench` prints them.
//
// Files: qshare.go is QShare's large-scale analysis (§7.3, Table 1 and
// Fig. 10; `bulkhead bench qshare`): QShare's placement fills a fat-tree,
// then QShare's scores and tenant-queue binding (mech/qshare) run on it at
// tenant level.
//
// Dependencies: analysis → {place, topo, alloc, the mechanisms analysed};
// only cmd imports it.
package analysis
