package controlpb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Plugin versions the generated files come from.
const (
	protocGenGo     = "google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12"
	protocGenGoGRPC = "google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1"
)

// TestGenerated regenerates the Go files from control.proto with protoc
// (Debian's protobuf-compiler) and the pinned plugins, and fails if they
// differ from the committed ones: the protocol's schema is the .proto.
func TestGenerated(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Fatal("protoc is missing: install Debian's protobuf-compiler (scripts/test does)")
	}
	bin := t.TempDir()
	for _, p := range []string{protocGenGo, protocGenGoGRPC} {
		cmd := exec.Command("go", "install", p)
		cmd.Env = append(os.Environ(), "GOBIN="+bin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go install %s: %v\n%s", p, err, out)
		}
	}
	out := t.TempDir()
	cmd := exec.Command(protoc, "--proto_path=.", "--plugin=protoc-gen-go="+filepath.Join(bin, "protoc-gen-go"),
		"--plugin=protoc-gen-go-grpc="+filepath.Join(bin, "protoc-gen-go-grpc"),
		"--go_out="+out, "--go_opt=paths=source_relative", "--go-grpc_out="+out, "--go-grpc_opt=paths=source_relative", "control.proto")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	for _, f := range []string{"control.pb.go", "control_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what control.proto generates: run go generate ./controlpb", f)
		}
	}
}
