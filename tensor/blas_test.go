package tensor_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// TestSystemBLASChoice runs the child half below in fresh processes, since the CPU
// kernels read SUBLET_BLAS once per process.
func TestSystemBLASChoice(t *testing.T) {
	if os.Getenv("SUBLET_TEST_BLAS_CHILD") != "" {
		blasChild(t)
		return
	}
	run := func(choice string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSystemBLASChoice$", "-test.v")
		cmd.Env = append(os.Environ(), "SUBLET_TEST_BLAS_CHILD=1", "SUBLET_BLAS="+choice)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	require.Contains(t, run("builtin"), "gemm builtin-")
	bad := run("/nonexistent/libopenblas.so")
	require.Contains(t, bad, `op error: tensor: MatMul`)
	require.Contains(t, bad, `SUBLET_BLAS="/nonexistent/libopenblas.so"`, "the error names the variable")
	if out := run("auto"); !strings.Contains(out, "gemm builtin-") {
		t.Logf("a system BLAS is installed; tensor ops use it:\n%s", out)
		require.Contains(t, out, "product ok")
	}
}

// blasChild multiplies two small matrices under the SUBLET_BLAS of its environment and
// prints which GEMM ran, or the op's error.
func blasChild(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	defer s.Close()
	err := tensor.Try(func() {
		a := tensor.FromSlice(s, d, dtype.F32, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
		b := tensor.FromSlice(s, d, dtype.F32, []float32{1, 0, 0, 1, 1, 1}, 3, 2)
		require.Equal(t, []float32{4, 5, 10, 11}, vals(a.MatMul(b)))
		t.Log("product ok")
	})
	if err != nil {
		t.Logf("op error: %v", err)
		return
	}
	name, err := tensor.HostGemm()
	require.NoError(t, err)
	t.Logf("gemm %s", name)
}
