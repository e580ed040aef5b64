package main

import (
	"errors"
	"flag"
	"fmt"
)

// The commands that read one file (a trace, a snapshot) take it the same way: as
// their argument, before or after the flags (sublet replay run.jsonl.gz -conf ...);
// those that replay a trace also take it as -trace FILE, the form the docs show.

// parseInput parses args into fs, flags anywhere among them, and returns the command's
// input file: its one argument, or the value of the -trace flag (trace; nil for a
// command without one), which it sets to the file. what says what the file must be.
// More than one file, or none when required, is bad usage.
func parseInput(fs *flag.FlagSet, args []string, trace *string, what string, required bool) (string, error) {
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", err
			}
			return "", errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if trace != nil && *trace != "" {
		files = append(files, *trace)
	}
	bad := ""
	switch {
	case len(files) > 1:
		bad = fmt.Sprintf("give one %s, not %d (%q)", what, len(files), files)
	case len(files) == 0 && required:
		bad = "give one " + what
	case len(files) == 0:
		return "", nil
	}
	if bad != "" {
		how := "as the argument"
		if trace != nil {
			how += " or with -trace"
		}
		fmt.Fprintf(fs.Output(), "%s: %s, %s\n", fs.Name(), bad, how)
		fs.Usage()
		return "", errUsage
	}
	if trace != nil {
		*trace = files[0]
	}
	return files[0], nil
}
