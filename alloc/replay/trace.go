package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/subletml/sublet/alloc"
)

// Op is what an Event does.
type Op uint8

const (
	// OpAlloc asks the allocator for Size bytes and names the block ID.
	OpAlloc Op = iota + 1
	// OpFree returns the block named ID.
	OpFree
	// OpEmptyCache releases every cached segment (torch.cuda.empty_cache).
	OpEmptyCache
)

var opNames = [...]string{OpAlloc: "alloc", OpFree: "free", OpEmptyCache: "empty_cache"}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("replay.Op(%d)", uint8(o))
}

// Event is one line of a trace.
type Event struct {
	Op Op
	// ID names the block of an alloc or free.
	ID int64
	// Size is the byte count an alloc requests.
	Size int64
	// Stream is the trace-local stream number of an alloc; 0 is the default stream.
	Stream int64
	// Lifetime is the hint an alloc was made with (alloc.Tag.Lifetime), which the
	// planned policy places it by; LifetimeUnknown when the trace has none.
	Lifetime alloc.Lifetime
}

// LineError is a trace that breaks the format or the liveness rules at one line.
type LineError struct {
	// Path is the file read, or "" for a reader.
	Path string
	// Line is 1-based.
	Line int
	Msg  string
}

func (e *LineError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("trace line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("trace %s line %d: %s", e.Path, e.Line, e.Msg)
}

// ReadFile reads a trace file, gzip-compressed or plain (told apart by the gzip magic
// bytes, not the name).
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	defer f.Close()
	events, err := Read(f)
	if le, ok := err.(*LineError); ok {
		le.Path = path
	} else if err != nil {
		err = fmt.Errorf("read trace %s: %w", path, err)
	}
	return events, err
}

// Read parses and validates a trace, gzip-compressed or plain. A malformed line, a free
// of an id that is not live, or an alloc of an id that is live is a *LineError.
func Read(r io.Reader) ([]Event, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	var events []Event
	var live liveness
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	for sc.Scan() {
		line := len(events) + 1
		e, err := parseLine(sc.Bytes())
		if err == nil {
			err = live.apply(e)
		}
		if err != nil {
			// A read error hands over the half line before it as the last line: then
			// the read error is the cause.
			if !sc.Scan() && sc.Err() != nil {
				return nil, scanError(line, sc.Err())
			}
			return nil, &LineError{Line: line, Msg: err.Error()}
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, scanError(len(events)+1, err)
	}
	return events, nil
}

// maxLine bounds the length of a trace line.
const maxLine = 1 << 20

// scanError is the *LineError of a read that failed at line.
func scanError(line int, err error) *LineError {
	if errors.Is(err, bufio.ErrTooLong) {
		return &LineError{Line: line, Msg: "line longer than 1 MiB"}
	}
	return &LineError{Line: line, Msg: err.Error()}
}

// Validate checks events against the liveness rules, naming the line of the first
// violation.
func Validate(events []Event) error {
	var live liveness
	for i, e := range events {
		if err := live.apply(e); err != nil {
			return &LineError{Line: i + 1, Msg: err.Error()}
		}
	}
	return nil
}

// liveness tracks which ids a trace has allocated and not freed.
type liveness struct {
	live map[int64]bool // id -> live; absent = never allocated
}

func (l *liveness) apply(e Event) error {
	if l.live == nil {
		l.live = make(map[int64]bool)
	}
	switch e.Op {
	case OpAlloc:
		if e.Size <= 0 || e.ID < 0 || e.Stream < 0 {
			return fmt.Errorf("alloc id %d size %d stream %d: size must be > 0, id and stream >= 0", e.ID, e.Size, e.Stream)
		}
		if l.live[e.ID] {
			return fmt.Errorf("alloc of id %d, which is still live: free it first or use a new id", e.ID)
		}
		l.live[e.ID] = true
	case OpFree:
		live, seen := l.live[e.ID]
		if !seen {
			return fmt.Errorf("free of id %d, which was never allocated", e.ID)
		}
		if !live {
			return fmt.Errorf("free of id %d, which is already freed", e.ID)
		}
		l.live[e.ID] = false
	case OpEmptyCache:
	default:
		return fmt.Errorf("unknown op %v", e.Op)
	}
	return nil
}

// parseLine decodes one JSON object strictly: exact key names, integers only, no extra
// fields (Go's encoding/json would accept "OP" or 1.0, which torch_replay.py would not).
func parseLine(b []byte) (Event, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Event{}, fmt.Errorf("blank line (a trace has one JSON event per line and nothing else)")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return Event{}, fmt.Errorf("not a JSON object: %v", err)
	}
	var opName string
	raw, ok := fields["op"]
	if !ok {
		return Event{}, fmt.Errorf(`missing "op"`)
	}
	if err := json.Unmarshal(raw, &opName); err != nil {
		return Event{}, fmt.Errorf(`"op" must be a string, got %s`, raw)
	}
	var e Event
	var want []string
	switch opName {
	case "alloc":
		e.Op, want = OpAlloc, []string{"id", "size", "stream", "lifetime"}
	case "free":
		e.Op, want = OpFree, []string{"id"}
	case "empty_cache":
		e.Op = OpEmptyCache
	default:
		return Event{}, fmt.Errorf(`unknown op %q (want "alloc", "free" or "empty_cache")`, opName)
	}
	for k := range fields {
		if k != "op" && !slices.Contains(want, k) {
			return Event{}, fmt.Errorf("unexpected field %q in a %s event", k, opName)
		}
	}
	targets := map[string]*int64{"id": &e.ID, "size": &e.Size, "stream": &e.Stream}
	for _, k := range want {
		raw, ok := fields[k]
		if !ok {
			if k == "stream" || k == "lifetime" {
				continue
			}
			return Event{}, fmt.Errorf("%s event without %q", opName, k)
		}
		if k == "lifetime" {
			var err error
			if e.Lifetime, err = parseLifetime(raw); err != nil {
				return Event{}, err
			}
			continue
		}
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return Event{}, fmt.Errorf("%q must be an integer, got %s", k, raw)
		}
		*targets[k] = v
	}
	return e, nil
}

// parseLifetime reads the value of an alloc's "lifetime": one of alloc.Lifetime's names.
func parseLifetime(raw json.RawMessage) (alloc.Lifetime, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		if l, ok := alloc.ParseLifetime(name); ok {
			return l, nil
		}
	}
	return 0, fmt.Errorf(`"lifetime" must be "unknown", "parameter", "optimizer_state", "activation" or "temporary", got %s`, raw)
}

// AppendLine appends e as one canonical JSON line (with its newline) to b.
func AppendLine(b []byte, e Event) []byte {
	b = append(b, `{"op":"`...)
	b = append(b, e.Op.String()...)
	b = append(b, '"')
	switch e.Op {
	case OpAlloc:
		b = append(b, `,"id":`...)
		b = strconv.AppendInt(b, e.ID, 10)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, e.Size, 10)
		if e.Stream != 0 {
			b = append(b, `,"stream":`...)
			b = strconv.AppendInt(b, e.Stream, 10)
		}
		if e.Lifetime != alloc.LifetimeUnknown {
			b = append(b, `,"lifetime":"`...)
			b = append(b, e.Lifetime.String()...)
			b = append(b, '"')
		}
	case OpFree:
		b = append(b, `,"id":`...)
		b = strconv.AppendInt(b, e.ID, 10)
	}
	return append(b, "}\n"...)
}

// Write writes events as canonical JSONL after validating them.
func Write(w io.Writer, events []Event) error {
	if err := Validate(events); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	var line []byte
	for _, e := range events {
		line = AppendLine(line[:0], e)
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteFile writes events to path, gzip-compressed when the name ends in ".gz". The
// bytes depend only on the events (the gzip header carries no name and no time).
func WriteFile(path string, events []Event) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(path, ".gz") {
		zw, _ = gzip.NewWriterLevel(f, gzip.BestCompression)
		w = zw
	}
	err = Write(w, events)
	if zw != nil && err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write trace %s: %w", path, err)
	}
	return nil
}
