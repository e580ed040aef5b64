// Package exflag parses the command lines of sublet's examples.
package exflag

import (
	"flag"
	"fmt"
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
