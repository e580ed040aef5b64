package replay

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/subletml/sublet/alloc"
)

// Matrix is the list of committed traces and of the (trace, conf, fraction) runs that
// the oracle script replays through PyTorch (testdata/traces/matrix.json).
type Matrix struct {
	// Traces are regenerated with Generate(Kind, Seed) into NAME.jsonl.gz beside the
	// matrix file.
	Traces []MatrixTrace `json:"traces"`
	Runs   []Run         `json:"runs"`
}

// MatrixTrace is one committed trace.
type MatrixTrace struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Seed int64  `json:"seed"`
	// Addresses asks the oracle script to also run torch_segment_addresses.py on it.
	Addresses bool `json:"addresses,omitempty"`
}

// Run is one oracle run; its result is testdata/oracle/NAME.json.gz.
type Run struct {
	Name  string `json:"name"`
	Trace string `json:"trace"`
	// Conf is a PYTORCH_CUDA_ALLOC_CONF string; "" is the default configuration.
	Conf string `json:"conf"`
	// Fraction is the per-process memory fraction; 0 sets none.
	Fraction float64 `json:"fraction"`
	// Alone runs it with nothing else on the GPU: required when the outcome depends on
	// how much device memory is free (a fraction, or the device's real limit).
	Alone bool `json:"alone"`
	// Why says what the run checks.
	Why string `json:"why"`
}

// fileName is what names may contain: they become file names, also on the GPU
// machine's way back (letters, digits, '.', '_', '-').
var fileName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// LoadMatrix reads and checks a matrix file: unique safe names, known kinds, runs that
// name a listed trace, confs sublet parses, fractions in [0, 1], and every fractional
// run alone.
func LoadMatrix(path string) (*Matrix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load matrix: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var m Matrix
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("load matrix %s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("load matrix %s: data after the matrix object (a file holds one JSON object)", path)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("load matrix %s: %w", path, err)
	}
	return &m, nil
}

func (m *Matrix) check() error {
	traces := make(map[string]bool)
	for _, t := range m.Traces {
		if !fileName.MatchString(t.Name) || traces[t.Name] {
			return fmt.Errorf("trace name %q is a duplicate or not of [A-Za-z0-9._-]+", t.Name)
		}
		if Describe(t.Kind) == "" {
			return fmt.Errorf("trace %s: unknown kind %q", t.Name, t.Kind)
		}
		traces[t.Name] = true
	}
	runs := make(map[string]bool)
	for _, r := range m.Runs {
		if !fileName.MatchString(r.Name) || runs[r.Name] {
			return fmt.Errorf("run name %q is a duplicate or not of [A-Za-z0-9._-]+", r.Name)
		}
		runs[r.Name] = true
		if !traces[r.Trace] {
			return fmt.Errorf("run %s: trace %q is not in the matrix's traces", r.Name, r.Trace)
		}
		if r.Fraction < 0 || r.Fraction > 1 {
			return fmt.Errorf("run %s: fraction %v is outside [0, 1]", r.Name, r.Fraction)
		}
		if r.Fraction > 0 && !r.Alone {
			return fmt.Errorf("run %s: fraction %v needs \"alone\": true (other processes' memory would change its outcome)", r.Name, r.Fraction)
		}
		if _, err := alloc.ParseConfig(r.Conf); err != nil {
			return fmt.Errorf("run %s: %w", r.Name, err)
		}
	}
	return nil
}

// TracePath is where the trace named name lives for a matrix file at matrixPath.
func TracePath(matrixPath, name string) string {
	return filepath.Join(filepath.Dir(matrixPath), name+".jsonl.gz")
}
