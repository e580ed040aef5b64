// Command sublet is the command line of the sublet runtime: it generates and inspects
// allocation traces and replays them through the caching allocator.
//
// Every subcommand writes its result to stdout and its errors to stderr, and exits
// nonzero on error: 1, or 2 for bad usage; `sublet replay` exits 3 when allocations ran
// out of memory (see its -h). `-h` prints a command's usage and exits 0. A command that
// reads one file (a trace, a snapshot) takes it as its argument, before or after the
// flags; those that replay a trace take -trace FILE too. run is the whole program with
// its streams passed in, so tests call it directly.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// command is one subcommand. Its flag set writes usage to stderr.
type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"compare", "replay a trace through PyTorch's and the planned allocation policy; print both side by side", runCompare},
		{"demo", "show the caching allocator on a few generated traces", runDemo},
		{"fit", "find the largest batch an MLP trains with on a device of a given memory (simulated, no GPU needed)", runFit},
		{"info", "print the devices, the default device and the allocator settings in force", runInfo},
		{"plot", "draw allocated, reserved and active memory over time as a PNG (from a snapshot or a trace)", runPlot},
		{"replay", "replay a trace through the caching allocator; print its statistics as JSON", runReplay},
		{"run", "start N processes of a program for data-parallel training (sublet run -h)", runLaunch},
		{"snapshot", "replay a trace with memory history on; write the memory snapshot (pickle or JSON)", runSnapshot},
		{"top", "a live view of every device's memory (this process, a replayed trace, or a program's /metrics)", runTop},
		{"trace", "generate, list and summarize allocation traces (sublet trace -h)", runTrace},
		{"viz", "render a memory snapshot as one self-contained HTML page on stdout", runViz},
	}
}

// run executes the subcommand named by args[0] and returns the exit status: 0 on
// success, 2 for bad usage, 1 for any other error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(args[1:], stdout, stderr)
			switch {
			case err == nil, errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			case errors.Is(err, errOOMs):
				return exitOOMs // reported by the command
			}
			fmt.Fprintf(stderr, "sublet %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "sublet: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// errUsage is returned after a flag set has already reported bad usage.
var errUsage = errors.New("bad usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sublet COMMAND [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

// parseFlags parses args into fs, mapping a parse failure (already printed by fs) to
// errUsage and refusing positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		fs.Usage()
		return errUsage
	}
	return nil
}

// newFlagSet returns a flag set that reports to stderr and returns errors.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}
