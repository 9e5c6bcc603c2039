// Package controlpb is the protocol between the controller and the host
// agents (control.proto), generated with protoc-gen-go and
// protoc-gen-go-grpc. Regenerate with `go generate ./controlpb` (needs
// protoc, Debian's protobuf-compiler, and the two plugins at the versions
// in gen_test.go); TestGenerated checks the files are current.
package controlpb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative control.proto
