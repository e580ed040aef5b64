package main

import (
	"errors"
	"flag"
	"fmt"
)

// parseFile parses args into fs and returns its one positional argument, a file; what
// says what the file must be when it is missing.
func parseFile(fs *flag.FlagSet, args []string, what string) (string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", err
		}
		return "", errUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(fs.Output(), "%s: give one %s\n", fs.Name(), what)
		fs.Usage()
		return "", errUsage
	}
	return fs.Arg(0), nil
}
