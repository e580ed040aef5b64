// Command quickstart is the README's "train a model" program: a small MLP learns XOR
// (which diagonal pair of quadrants a point lies in), one scope per step, and the
// allocator holds the same bytes after every step: the data, the parameters and
// Adam's state.
//
//	go run ./examples/quickstart
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/named"
)

func main() {
	if err := run(os.Stdout, 100); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run trains for steps steps, printing the loss and the bytes held every 20 steps; it
// fails if the bytes held after a step are ever other than after the first.
func run(out io.Writer, steps int) error {
	dev, err := named.Open("cpu")
	if err != nil {
		return err
	}
	al, err := alloc.For(dev)
	if err != nil {
		return err
	}
	var flat int64
	onStep := func(i int, loss float64) error {
		held := al.Stats().RequestedBytes[alloc.StatAll].Current
		if i == 1 {
			flat = held
		}
		if i%20 == 0 || i == 1 {
			fmt.Fprintf(out, "step %3d  loss %.4f  held %d bytes\n", i, loss, held)
		}
		if held != flat {
			return fmt.Errorf("step %d: %d bytes held, %d after the first step", i, held, flat)
		}
		return nil
	}
	acc, err := train(dev, steps, onStep)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "accuracy %.2f; %d bytes held after training\n", acc, al.Stats().RequestedBytes[alloc.StatAll].Current)
	return nil
}
