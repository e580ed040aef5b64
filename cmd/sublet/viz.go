package main

import (
	"io"

	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/alloc/memviz"
)

func runViz(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("viz", "sublet viz [-title TEXT] SNAPSHOT > page.html", stderr)
	title := fs.String("title", "", "the page's title (default: sublet memory snapshot: SNAPSHOT)")
	path, err := parseInput(fs, args, nil, "snapshot file (pickle or JSON, sublet's or PyTorch's)", true)
	if err != nil {
		return err
	}
	s, err := memsnap.ReadFile(path)
	if err != nil {
		return err
	}
	if *title == "" {
		*title = "sublet memory snapshot: " + path
	}
	p := newProgress(stderr, "rendering "+path+" (devices)", 0)
	return memviz.WriteHTML(stdout, s, memviz.Options{Title: *title, Progress: func(done, total int) {
		p.total = total
		p.update(done)
	}})
}
