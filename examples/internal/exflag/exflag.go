// Package exflag parses the command lines of sublet's examples and turns what their run
// returned into an exit status.
package exflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

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
// os.Exit(exflag.Status(name, run(...), os.Stderr)).
func Status(name string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}
