package memsnap

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// WriteFile writes s to path: JSON when the name ends in ".json", else a pickle (the
// form PyTorch's tools read; _dump_snapshot's default name is dump_snapshot.pickle).
func WriteFile(path string, s *Snapshot) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	write := WritePickle
	if strings.HasSuffix(path, ".json") {
		write = WriteJSON
	}
	if err := write(f, s); err != nil {
		f.Close()
		return fmt.Errorf("write snapshot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write snapshot %s: %w", path, err)
	}
	return nil
}

// Read reads a snapshot as a pickle or as JSON, told apart by the first byte (a
// pickle of protocol 2 or more starts with 0x80), not the name.
func Read(r io.Reader) (*Snapshot, error) {
	br := bufio.NewReader(r)
	b, err := br.Peek(1)
	if err == io.EOF {
		return nil, fmt.Errorf("empty snapshot: want a pickle or JSON")
	}
	if err != nil {
		return nil, err
	}
	if b[0] == opProto {
		return ReadPickle(br)
	}
	return ReadJSON(br)
}

// ReadFile is Read of the file at path; errors name it.
func ReadFile(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	defer f.Close()
	s, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", path, err)
	}
	return s, nil
}
