package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/cpu"
)

// The README's loop keeps memory flat: after each of 100 steps the allocator holds,
// to the byte, the data (64 points of 2 floats, 64 labels of 8 bytes), the MLP
// 2-16-2's 82 parameters and Adam's two moments of each; and nothing once training
// is over. The model learns XOR.
func TestLoopMemoryIsFlat(t *testing.T) {
	dev, err := cpu.New(cpu.Options{})
	require.NoError(t, err)
	al, err := alloc.For(dev)
	require.NoError(t, err)
	const want = 64*2*4 + 64*8 + 82*4*3
	var losses []float64
	acc, err := train(dev, 100, func(i int, loss float64) error {
		require.Equal(t, int64(want), al.Stats().RequestedBytes[alloc.StatAll].Current, "after step %d", i)
		losses = append(losses, loss)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, losses, 100)
	require.Less(t, losses[99], 0.01, "the loss falls from %.4f", losses[0])
	require.Equal(t, 1.0, acc)
	require.Zero(t, al.Stats().RequestedBytes[alloc.StatAll].Current)
	require.NoError(t, al.EmptyCache())
}

func TestRunPrintsProgress(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, 100))
	require.Regexp(t, `step 100  loss 0\.00\d\d  held 2008 bytes\n`, out.String())
	require.Contains(t, out.String(), "accuracy 1.00; 0 bytes held after training\n")
}

// The README shows train as it is in train.go.
func TestReadmeShowsTheLoop(t *testing.T) {
	src, err := os.ReadFile("train.go")
	require.NoError(t, err)
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	code := string(src)
	start := strings.Index(code, "func train(")
	end := start + strings.Index(code[start:], "\n}\n") + 3
	require.Contains(t, string(readme), "```go\n"+code[start:end]+"```\n")
}
