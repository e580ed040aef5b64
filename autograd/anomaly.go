package autograd

import (
	"fmt"
	"path"
	"runtime"
	"strings"
)

// maxSiteFrames bounds a Site: enough to see the op, the layer and the
// caller's step, small enough to record on every op under anomaly mode.
const maxSiteFrames = 12

// Frame is one call in a Site.
type Frame struct {
	Function string // package-qualified, module path trimmed: "tensor.(*Scope).Mul"
	File     string // last directory and file name: "tensor/mul.go"
	Line     int
}

// Site is where a node was created: a compact call stack, innermost first.
type Site []Frame

// CaptureSite records the stack of its caller: skip 0 starts at the function
// that calls CaptureSite, 1 at that function's caller, and so on. Frames of
// the Go runtime are left out.
func CaptureSite(skip int) Site {
	pcs := make([]uintptr, maxSiteFrames+4)
	k := runtime.Callers(skip+2, pcs)
	frames := runtime.CallersFrames(pcs[:k])
	var s Site
	for len(s) < maxSiteFrames {
		f, more := frames.Next()
		if f.Function != "" && !strings.HasPrefix(f.Function, "runtime.") {
			s = append(s, Frame{
				Function: path.Base(f.Function),
				File:     path.Join(path.Base(path.Dir(f.File)), path.Base(f.File)),
				Line:     f.Line,
			})
		}
		if !more {
			break
		}
	}
	return s
}

// String lists the frames, one per line.
func (s Site) String() string {
	var b strings.Builder
	for i, f := range s {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "  %s (%s:%d)", f.Function, f.File, f.Line)
	}
	return b.String()
}

// AnomalyError reports a node whose backward produced a NaN or an Inf, found
// under Options.DetectAnomaly.
type AnomalyError struct {
	Node   *Node // the node whose Function returned the value
	Output int   // which of its gradients (the forward input index)
}

func (e *AnomalyError) Error() string {
	return fmt.Sprintf("autograd: anomaly: function '%s' (node %s) returned NaN or Inf values in its %d%s output%s",
		e.Node.name, e.Node, e.Output, ordinal(e.Output), createdAt(e.Node))
}

func ordinal(i int) string {
	if i%100 >= 11 && i%100 <= 13 {
		return "th"
	}
	switch i % 10 {
	case 1:
		return "st"
	case 2:
		return "nd"
	case 3:
		return "rd"
	}
	return "th"
}

// createdAt tells where n was created, or how to find out.
func createdAt(n *Node) string {
	if n.site == nil {
		return "; record creation sites (anomaly mode during the forward) to see where the op was created"
	}
	return fmt.Sprintf("; %s was created at:\n%s", n, *n.site)
}
