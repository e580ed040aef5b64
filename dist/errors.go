package dist

import (
	"errors"
	"fmt"
)

// Causes an *Error wraps; test with errors.Is. A cause crosses processes: when rank 0
// reports a failure to the others, their errors wrap the same cause.
var (
	// ErrConfig: a bad or missing setting (an environment variable, a Config field, a
	// flag of the launcher).
	ErrConfig = errors.New("bad distributed configuration")
	// ErrRendezvous: the processes could not form the group (nobody listening at the
	// master address, two processes with one rank, world sizes that disagree, something
	// else answering on the port).
	ErrRendezvous = errors.New("rendezvous failed")
	// ErrTimeout: a rank did not take part within the timeout: it is hung, or far
	// behind the others.
	ErrTimeout = errors.New("timed out")
	// ErrPeerGone: a rank closed its connection: its process died, or closed or
	// aborted its group.
	ErrPeerGone = errors.New("a rank left the group")
	// ErrMismatch: ranks called different collectives (operation, type, count, root or
	// reduction) at the same position in their sequences.
	ErrMismatch = errors.New("ranks called different collectives")
	// ErrAborted: the group was aborted (Abort on some rank).
	ErrAborted = errors.New("group aborted")
	// ErrClosed: the group or a backend was used after Close.
	ErrClosed = errors.New("group closed")
	// ErrUnsupported: a tensor or an operation the backend cannot communicate (its
	// type, device or layout, a reduction of booleans, ...).
	ErrUnsupported = errors.New("not supported by this backend")
	// ErrUnfinished: a backward of a DataParallel model did not reach every parameter,
	// so its gradients were never averaged.
	ErrUnfinished = errors.New("gradient reduction unfinished")
	// ErrBackend: the communication library failed (NCCL could not load, refused a
	// call, or reported an error while a collective ran).
	ErrBackend = errors.New("communication library failed")
)

// causes lists the causes in the order of their wire codes (index + 1; 0 is a cause
// that is none of them).
var causes = []error{ErrConfig, ErrRendezvous, ErrTimeout, ErrPeerGone, ErrMismatch, ErrAborted, ErrClosed, ErrUnsupported, ErrUnfinished, ErrBackend}

// causeCode is the wire code of err's cause.
func causeCode(err error) uint8 {
	for i, c := range causes {
		if errors.Is(err, c) {
			return uint8(i + 1)
		}
	}
	return 0
}

// causeOf is the cause a wire code names (nil for 0 or an unknown code).
func causeOf(code uint8) error {
	if code == 0 || int(code) > len(causes) {
		return nil
	}
	return causes[code-1]
}

// Error is the error of a group operation: the rendezvous, a collective, a launch.
// It names the rank that reports it and, when one is known, the rank at fault.
type Error struct {
	// Op is the operation: "rendezvous", "AllReduce #12 (float32[1024], avg)".
	Op string
	// Rank is the rank reporting the error (-1 before it is known).
	Rank int
	// Peer is the rank at fault, -1 when none is known or the fault is the reporter's.
	Peer int
	// Msg says what happened and what to do.
	Msg string
	// Err is the cause: one of the Err* values, possibly wrapping an I/O error.
	Err error
}

func (e *Error) Error() string {
	s := "dist"
	if e.Rank >= 0 {
		s += fmt.Sprintf(": rank %d", e.Rank)
	}
	if e.Op != "" {
		s += ": " + e.Op
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// configErr is the error of a bad setting: the variable (or field) and its value.
func configErr(name, value, format string, args ...any) error {
	return &Error{Op: fmt.Sprintf("%s=%q", name, value), Rank: -1, Peer: -1, Msg: fmt.Sprintf(format, args...), Err: ErrConfig}
}
