package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/subletml/sublet/alloc/replay"
)

func runTrace(args []string, stdout, stderr io.Writer) error {
	subs := []command{
		{"gen", "write a generated trace (or every trace of a matrix file)", runTraceGen},
		{"info", "print a trace's summary as JSON (events, peak live bytes, sizes)", runTraceInfo},
		{"kinds", "list the generator kinds", runTraceKinds},
	}
	if len(args) > 0 {
		for _, c := range subs {
			if c.name == args[0] {
				return c.run(args[1:], stdout, stderr)
			}
		}
	}
	fmt.Fprintln(stderr, "usage: sublet trace SUBCOMMAND [flags]\n\nsubcommands:")
	for _, c := range subs {
		fmt.Fprintf(stderr, "  %-6s %s\n", c.name, c.summary)
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help") {
		return nil
	}
	return errUsage
}

func runTraceGen(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace gen", "sublet trace gen (-kind K [-seed S] [-o FILE] | -matrix FILE)", stderr)
	kind := fs.String("kind", "", "generator kind (sublet trace kinds lists them)")
	seed := fs.Int64("seed", 1, "generator seed")
	out := fs.String("o", "-", `output file; ".gz" compresses; "-" is stdout`)
	matrix := fs.String("matrix", "", "regenerate every trace of this matrix file into its folder")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*kind == "") == (*matrix == "") {
		fmt.Fprintln(stderr, "trace gen: give exactly one of -kind and -matrix")
		fs.Usage()
		return errUsage
	}
	if *matrix != "" {
		m, err := replay.LoadMatrix(*matrix)
		if err != nil {
			return err
		}
		for _, t := range m.Traces {
			if err := genTo(t.Kind, t.Seed, replay.TracePath(*matrix, t.Name), stdout); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "wrote %s\n", replay.TracePath(*matrix, t.Name))
		}
		return nil
	}
	return genTo(*kind, *seed, *out, stdout)
}

// genTo writes the trace of (kind, seed) to path, or to stdout when path is "-".
func genTo(kind string, seed int64, path string, stdout io.Writer) error {
	events, err := replay.Generate(kind, seed)
	if err != nil {
		return err
	}
	if path == "-" {
		return replay.Write(stdout, events)
	}
	return replay.WriteFile(path, events)
}

func runTraceInfo(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace info", "sublet trace info TRACE (or -trace TRACE)", stderr)
	trace := fs.String("trace", "", "the "+traceWhat+", when the argument does not give it")
	path, err := parseInput(fs, args, trace, traceWhat, true)
	if err != nil {
		return err
	}
	events, err := replay.ReadFile(path)
	if err != nil {
		return err
	}
	return writeJSON(stdout, replay.Summarize(events))
}

func runTraceKinds(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace kinds", "sublet trace kinds", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for _, k := range replay.Kinds() {
		fmt.Fprintf(stdout, "%-14s %s\n", k, replay.Describe(k))
	}
	return nil
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
