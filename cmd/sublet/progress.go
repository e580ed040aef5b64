package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// progress reports a long operation's advance on stderr, only when stderr is a
// terminal, at most every 100 ms, on one line rewritten in place.
type progress struct {
	w     io.Writer // nil when stderr is not a terminal
	what  string
	total int
	last  time.Time
}

func newProgress(stderr io.Writer, what string, total int) *progress {
	p := &progress{what: what, total: total}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.w = stderr
	}
	return p
}

// update reports that done of total are done.
func (p *progress) update(done int) {
	if p.w == nil {
		return
	}
	if now := time.Now(); done < p.total && now.Sub(p.last) < 100*time.Millisecond {
		return
	} else {
		p.last = now
	}
	fmt.Fprintf(p.w, "\r%s: %d of %d (%d%%)", p.what, done, p.total, 100*done/max(p.total, 1))
	if done >= p.total {
		fmt.Fprintln(p.w)
	}
}
