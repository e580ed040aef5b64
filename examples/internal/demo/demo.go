// Package demo is the plumbing sublet's example programs share, so that each example's
// own files hold only what it shows.
//
// # Use
//
// In an example's main package:
//
//	func main() { os.Exit(demo.Status("leaks", run(os.Args[1:], os.Stdout), os.Stderr)) }
//
//	fs := demo.Flags("leaks", out)              // a flag set run can test; -h exits 0 through Status
//	demo.DeviceFlag(fs, &c.device, "cpu")       // -device, with device/named's names
//	err := demo.Parse(fs, args)                 // and no positional arguments
//	dev, a, hasData, err := demo.Open(c.device) // a fresh device, or the GPU
//	err = demo.Try(dev, func() error { ... })   // tensor panics back as errors, with advice
//	m := demo.Read(a)                           // the allocator's figures at a named moment
//	demo.Table(out, "  ", header, rows)
//	return demo.Drain(a)                        // the end of every example: nothing left
//
// Byte counts are written by internal/units (units.Bytes); the data sets the examples
// train on are in examples/internal/toy.
//
// Invariants: nothing here keeps state between calls; Open never returns a device
// another call returned, except for cuda, which has one device value per process
// (device/named) and so one allocator shared by all runs in the process.
package demo

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/subletml/sublet/device/named"
)

// Flags returns the flag set of the example called name. It writes its usage and errors
// to out and returns them from Parse instead of exiting (flag.ContinueOnError), so that
// an example's run can be tested whole, and -h comes back as flag.ErrHelp, which Status
// turns into exit status 0.
func Flags(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return fs
}

// DeviceFlag defines fs's -device flag, which sets *p (def by default) to a name that
// Open and OpenWith read: device/named's names.
func DeviceFlag(fs *flag.FlagSet, p *string, def string) {
	usage := named.Usage
	if def == "" {
		usage += "; empty: " + named.EnvVar + " when set, else cuda:0 where a GPU is usable, else cpu"
	}
	fs.StringVar(p, "device", def, usage)
}

// Parse parses args into fs and refuses positional arguments, which no example takes.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

// Status is the exit status of the example called name whose run returned err: 0 for
// nil and for -h or -help (flag.ErrHelp: the flag set has printed the usage), else 1,
// after printing "name: err" on stderr. Each example's main is
// os.Exit(demo.Status(name, run(...), os.Stderr)).
func Status(name string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}
