//go:build linux && (amd64 || arm64)

// Package nccltest runs tests of the NCCL binding, and of what is built on it, without
// a GPU: it compiles a stand-in for libnccl.so.2 (testdata/fakenccl.c: the entry points
// package nccl binds, on nothing but host memory, recording each call's arguments and the
// thread it came from, failing on request) and runs a test again in a child process
// whose LD_LIBRARY_PATH puts the stand-in first (the library is loaded once per process
// and the loader reads LD_LIBRARY_PATH at start).
//
// A test calls Run: in the parent it builds the stand-in (skipping where there is no C
// compiler) and re-runs itself in the child, which it requires to pass; in the child
// Run returns the Fake and the test goes on against it.
package nccltest

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/require"
)

//go:embed testdata/fakenccl.c
var source []byte

// childEnv marks the child process.
const childEnv = "SUBLET_NCCL_FAKE"

// Fake drives the stand-in library loaded in this process.
type Fake struct {
	last     func() string
	setAsync func(int32)
}

// Last describes the last call the library received: its arguments, and thread=1 when
// it came from the thread that made the communicator.
func (f *Fake) Last() string { return f.last() }

// SetAsync sets the ncclResult_t that ncclCommGetAsyncError reports from now on.
func (f *Fake) SetAsync(r int) { f.setAsync(int32(r)) }

// Run returns the Fake in the child process. In the parent it builds the stand-in,
// runs the calling test (t.Name()) again in a child and returns nil once the child
// passed: the caller returns then.
func Run(t *testing.T) *Fake {
	t.Helper()
	if os.Getenv(childEnv) != "" {
		h, err := purego.Dlopen("libnccl.so.2", purego.RTLD_NOW|purego.RTLD_LOCAL)
		require.NoError(t, err)
		f := new(Fake)
		purego.RegisterLibFunc(&f.last, h, "fake_last")
		purego.RegisterLibFunc(&f.setAsync, h, "fake_set_async")
		return f
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build the stand-in libnccl.so.2:", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "fakenccl.c")
	require.NoError(t, os.WriteFile(src, source, 0o644))
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", filepath.Join(dir, "libnccl.so.2"), src, "-lpthread").CombinedOutput()
	require.NoError(t, err, "%s", out)
	name := strings.ReplaceAll(t.Name(), "/", "$/^")
	child := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	child.Env = append(os.Environ(), childEnv+"=1", "LD_LIBRARY_PATH="+dir)
	out, err = child.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: "+t.Name(), "%s", out)
	return nil
}
