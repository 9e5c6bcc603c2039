package pairbytes

// The BPF objects (pairbytes_bpfel.o, pairbytes_bpfeb.o) and their Go
// bindings are generated from bpf/pairbytes.c and committed; regenerate
// them with clang and llvm-strip on the PATH (Debian: apt-get install -y
// clang llvm) by `go generate ./dataplane/pairbytes`. The second step
// records the source's digest, which TestObjectsMatchSource checks: a
// change to the C source without regeneration fails the tests.
//go:generate go tool bpf2go -cc clang -strip llvm-strip -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel,bpfeb -type pair -type counts -type stats pairbytes bpf/pairbytes.c
//go:generate sh -c "sha256sum bpf/pairbytes.c > bpf/pairbytes.c.sha256"
