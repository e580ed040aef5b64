package sim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/device"
)

// Segment is one raw allocation as a real driver served it: its size and the address it
// returned. torch_replay.py records them in its output field "segments".
type Segment struct {
	Size int64      `json:"size"`
	Addr device.Ptr `json:"addr"`
}

// LoadSegments reads recorded segments from path: a JSON array of {"size","addr"}, or a
// torch_replay.py result (a JSON object, gzip'd or plain, whose "segments" field holds
// that array).
func LoadSegments(path string) ([]Segment, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sim.LoadSegments: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("sim.LoadSegments %s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("sim.LoadSegments %s: %w", path, err)
	}
	var segs []Segment
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		var res struct {
			Segments *[]Segment `json:"segments"`
		}
		if err := json.Unmarshal(trimmed, &res); err != nil {
			return nil, fmt.Errorf("sim.LoadSegments %s: %w", path, err)
		}
		if res.Segments == nil {
			return nil, fmt.Errorf("sim.LoadSegments %s: the JSON object has no \"segments\" field; want a torch_replay.py result or an array of {\"size\",\"addr\"}", path)
		}
		segs = *res.Segments
	} else if err := json.Unmarshal(trimmed, &segs); err != nil {
		return nil, fmt.Errorf("sim.LoadSegments %s: %w", path, err)
	}
	if err := checkSegments(segs); err != nil {
		return nil, fmt.Errorf("sim.LoadSegments %s: %w", path, err)
	}
	return segs, nil
}

// checkSegments refuses segments no driver could have returned.
func checkSegments(segs []Segment) error {
	for i, s := range segs {
		if s.Size <= 0 || s.Addr == 0 || s.Addr%512 != 0 {
			return fmt.Errorf("segment index %d {size %d, addr %#x}: want a positive size and a nonzero address aligned to 512 bytes", i, s.Size, uintptr(s.Addr))
		}
	}
	return nil
}
