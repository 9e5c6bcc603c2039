package seqloss

// The BPF objects (seqloss_bpfel.o, seqloss_bpfeb.o) and their Go bindings
// are generated from bpf/seqloss.c and committed; regenerate them with
// clang and llvm-strip on the PATH (Debian: apt-get install -y clang llvm)
// by `go generate ./dataplane/seqloss`. The second step records the
// source's digest, which TestObjectsMatchSource checks: a change to the C
// source without regeneration fails the tests.
//go:generate go tool bpf2go -cc clang -strip llvm-strip -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel,bpfeb -type pair -type tx_val -type rx_val -type stats seqloss bpf/seqloss.c
//go:generate sh -c "sha256sum bpf/seqloss.c > bpf/seqloss.c.sha256"
