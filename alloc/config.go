package alloc

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
)

// ConfigEnv is the environment variable ConfigFromEnv reads. Its syntax is that of
// PyTorch's PYTORCH_CUDA_ALLOC_CONF.
const ConfigEnv = "SUBLET_ALLOC_CONF"

// Config holds the allocator's knobs, the native-backend subset of
// PYTORCH_CUDA_ALLOC_CONF. The zero Config is PyTorch's default behaviour.
type Config struct {
	// MaxSplitSize in bytes: blocks this large or larger are never split and are only
	// reused by requests within MaxNonSplitRounding of their size. 0 = unlimited.
	// Otherwise at least 20 MiB.
	MaxSplitSize int64
	// MaxNonSplitRounding in bytes: an oversize request accepts a cached oversize block
	// only if the block is smaller than request + this. 0 = the default, 20 MiB.
	// Otherwise at least 20 MiB.
	MaxNonSplitRounding int64
	// RoundupPower2Divisions[i] governs requests of [2^i MiB, 2^(i+1) MiB) (index 0
	// also everything below 2 MiB, index 15 everything from 32 GiB up): requests there
	// are rounded up to one of that many equal steps between two powers of two. Each
	// entry is 0 (off) or a power of two; 1 is the same as off.
	RoundupPower2Divisions [RoundupIntervals]int
	// GarbageCollectionThreshold in (0, 1), or 0 = off: when a memory fraction is set
	// and reserved memory exceeds this share of the allowed memory, the oldest cached
	// unsplit large blocks are released before a new segment is requested.
	GarbageCollectionThreshold float64
	// ExpandableSegments grows one segment per (pool, stream) by mapping pages into a
	// reserved address range, instead of allocating fixed segments. It needs a device
	// that implements device.VirtualMemory; on any other device it is off, as in PyTorch
	// (New reports the effective value in Allocator.Config). PolicyPlanned turns it on
	// wherever the device allows.
	ExpandableSegments bool
	// PerProcessMemoryFraction in (0, 1], or 0 = none: New calls SetMemoryFraction with
	// it, which caps reserved memory at this share of the device's total memory and arms
	// the garbage collection threshold.
	PerProcessMemoryFraction float64
	// Policy is the allocation policy (key policy): PolicyPyTorch, the zero value, makes
	// PyTorch's decisions exactly; PolicyPlanned plans steady loops and stitches free
	// pages (docs/allocator.md, "The planned policy").
	Policy Policy

	// Pinned holds the pinned_* keys. They configure the host (pinned) allocator,
	// which applies them (pinned.New, pinned.NewConfig); this allocator only validates
	// them.
	Pinned PinnedConfig
}

// PinnedConfig holds the pinned_* keys of an allocator config string, for the host
// (pinned) caching allocator, package alloc/pinned, whose doc says how each applies. The
// zero value is PyTorch's default.
type PinnedConfig struct {
	// UseHostRegister: pinned_use_cuda_host_register (alias pinned_use_hip_host_register):
	// blocks are ordinary memory page-locked in place (device.HostRegisterer) instead of
	// the device's HostAlloc.
	UseHostRegister bool
	// NumRegisterThreads: pinned_num_register_threads, a power of two ≤ 128; 0 = default
	// (1). The goroutines that fault in a new block's pages before it is registered; only
	// meaningful with UseHostRegister.
	NumRegisterThreads int
	// UseBackgroundThreads: pinned_use_background_threads: a goroutine returns blocks
	// whose events completed to the cache, instead of Alloc.
	UseBackgroundThreads bool
	// ReserveSegmentSize in bytes: pinned_reserve_segment_size_mb; 0 = none. One segment
	// taken up front that new blocks are carved from while it has room.
	ReserveSegmentSize int64
	// MaxRoundThreshold in bytes: pinned_max_round_threshold_mb; 0 = off. Larger requests
	// are not rounded up to a power of two.
	MaxRoundThreshold int64
	// MaxCachedSize in bytes: pinned_max_cached_size_mb; 0 = off. Larger blocks are not
	// cached: they go back to the system when freed.
	MaxCachedSize int64
	// FreeCatchAll: pinned_free_catch_all. Parsed, but the host allocator refuses it: its
	// PyTorch semantics are not established (docs/allocator.md).
	FreeCatchAll bool
}

// Limits of the configuration values, as PyTorch 2.11 checks them.
const (
	// RoundupIntervals is the number of power-of-two intervals of the divisions table:
	// 1 MiB to 64 GiB.
	RoundupIntervals = 16
	// minSplitSizeMiB bounds max_split_size_mb and max_non_split_rounding_mb from below
	// (kLargeBuffer / 1 MiB).
	minSplitSizeMiB = LargeBuffer / oneMiB
	// maxSizeMiB is the largest MiB count whose byte count fits an int64; larger values
	// are clamped to it (PyTorch clamps to SIZE_MAX / 1 MiB).
	maxSizeMiB = math.MaxInt64 / oneMiB
	// maxPinnedRegisterThreads bounds pinned_num_register_threads.
	maxPinnedRegisterThreads = 128
)

// ConfigError is a bad allocator config string or value.
type ConfigError struct {
	// Input is the whole config string ("" when a Go Config value was checked).
	Input string
	// Key is the option the error is about ("" when it precedes any key).
	Key string
	// Offset is the byte offset in Input where the problem was found (-1 for a Go value).
	Offset int
	// Msg says what is wrong and what is allowed.
	Msg string
}

func (e *ConfigError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("alloc: config: %s: %s", e.Key, e.Msg)
	}
	if e.Key == "" {
		return fmt.Sprintf("alloc: config %q: at byte %d: %s", e.Input, e.Offset, e.Msg)
	}
	return fmt.Sprintf("alloc: config %q: key %s at byte %d: %s", e.Input, e.Key, e.Offset, e.Msg)
}

// ConfigFromEnv parses SUBLET_ALLOC_CONF; unset or empty gives the default Config.
func ConfigFromEnv() (Config, error) {
	return ParseConfig(os.Getenv(ConfigEnv))
}

// token is one token of a config string: one of , : [ ] or a word, with the byte offset
// of its first character.
type token struct {
	text string
	off  int
}

// tokenize splits s like PyTorch's ConfigTokenizer: each of , : [ ] is a token, all
// other non-space characters accumulate into words, and whitespace is dropped
// everywhere (so "max_split _size_mb" is one word, as in PyTorch).
func tokenize(s string) []token {
	var toks []token
	var word []byte
	wordOff := 0
	flush := func() {
		if len(word) > 0 {
			toks = append(toks, token{string(word), wordOff})
			word = word[:0]
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ',', ':', '[', ']':
			flush()
			toks = append(toks, token{s[i : i+1], i})
		case ' ', '\t', '\n', '\v', '\f', '\r':
		default:
			if len(word) == 0 {
				wordOff = i
			}
			word = append(word, c)
		}
	}
	flush()
	return toks
}

// configParser walks the tokens of one config string.
type configParser struct {
	in   string
	toks []token
	key  string // the key being parsed, for errors
}

func (p *configParser) errAt(i int, format string, args ...any) *ConfigError {
	off := len(p.in)
	if i < len(p.toks) {
		off = p.toks[i].off
	}
	return &ConfigError{Input: p.in, Key: p.key, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// tok returns token i, or an error naming what was expected when the string ends first.
func (p *configParser) tok(i int, want string) (string, error) {
	if i >= len(p.toks) {
		return "", p.errAt(i, "expected %s but the string ends", want)
	}
	return p.toks[i].text, nil
}

func (p *configParser) expect(i int, punct string) error {
	t, err := p.tok(i, "'"+punct+"'")
	if err != nil {
		return err
	}
	if t != punct {
		return p.errAt(i, "expected '%s' but got '%s'", punct, t)
	}
	return nil
}

func isPunct(t string) bool { return t == "," || t == ":" || t == "[" || t == "]" }

// uint parses token i as a decimal integer. PyTorch uses stoull, which also takes
// "20abc" as 20 and "-1" as 2^64-1; sublet requires the whole token to be digits.
func (p *configParser) uint(i int) (uint64, error) {
	t, err := p.tok(i, "an integer")
	if err != nil {
		return 0, err
	}
	v, perr := strconv.ParseUint(t, 10, 64)
	if perr != nil || isPunct(t) {
		return 0, p.errAt(i, "expected a non-negative decimal integer but got '%s'", t)
	}
	return v, nil
}

// float parses token i as a decimal number (stod in PyTorch; sublet requires the whole
// token to be the number).
func (p *configParser) float(i int) (float64, error) {
	t, err := p.tok(i, "a number")
	if err != nil {
		return 0, err
	}
	v, perr := strconv.ParseFloat(t, 64)
	if perr != nil || math.IsNaN(v) {
		return 0, p.errAt(i, "expected a number but got '%s'", t)
	}
	return v, nil
}

// bool parses token i: exactly True or False, as in PyTorch.
func (p *configParser) bool(i int) (bool, error) {
	t, err := p.tok(i, "True or False")
	if err != nil {
		return false, err
	}
	switch t {
	case "True":
		return true, nil
	case "False":
		return false, nil
	}
	return false, p.errAt(i, "expected 'True' or 'False' but got '%s'", t)
}

// mib parses token i as a MiB count of at least min and returns bytes; larger counts
// are clamped as in PyTorch.
func (p *configParser) mib(i int, min uint64) (int64, error) {
	v, err := p.uint(i)
	if err != nil {
		return 0, err
	}
	if v < min {
		return 0, p.errAt(i, "%d MiB is too small, must be >= %d", v, min)
	}
	return clampMiB(v), nil
}

func clampMiB(v uint64) int64 {
	if v > maxSizeMiB {
		v = maxSizeMiB
	}
	return int64(v) * oneMiB
}

func isPow2(v uint64) bool { return v != 0 && v&(v-1) == 0 }

// unsupported are PyTorch allocator keys sublet recognizes but does not implement. They
// are errors rather than silently ignored.
var unsupported = map[string]string{
	"release_lock_on_cudamalloc":           "sublet's allocator always holds its lock around device allocation",
	"release_lock_on_hipmalloc":            "sublet's allocator always holds its lock around device allocation",
	"graph_capture_record_stream_reuse":    "sublet has no graph capture",
	"throw_on_cudamalloc_oom":              "not implemented; use per_process_memory_fraction",
	"large_segment_size_mb":                "the large segment size is fixed at 20 MiB",
	"expandable_segments_page_size":        "expandable segment pages are fixed at 2 MiB (small pool) and 20 MiB (large pool)",
	"expandable_segments_reserve":          "expandable segments reserve 1.125 × device memory per (pool, stream)",
	"expandable_segments_reserve_by_class": "expandable segments reserve 1.125 × device memory per (pool, stream)",
}

// ParseConfig parses an allocator config string in PYTORCH_CUDA_ALLOC_CONF syntax:
// "key:value,key:value", whitespace ignored, booleans exactly True/False,
// roundup_power2_divisions either one power of two or a list
// "[1024:4,>:8]" of MiB-interval:divisions pairs. Validation follows PyTorch 2.11;
// every error names the key and the byte offset. Unknown keys are errors. As in PyTorch,
// a key given twice takes its last value and a trailing comma is accepted.
func ParseConfig(s string) (Config, error) {
	p := &configParser{in: s, toks: tokenize(s)}
	var c Config
	for i := 0; i < len(p.toks); i++ {
		key := p.toks[i].text
		p.key = ""
		if isPunct(key) {
			return Config{}, p.errAt(i, "expected a key but got '%s'", key)
		}
		p.key = key
		if err := p.expect(i+1, ":"); err != nil {
			return Config{}, err
		}
		i += 2
		var err error
		switch key {
		case "backend":
			var t string
			if t, err = p.tok(i, "a backend name"); err == nil && t != "native" {
				err = p.errAt(i, "backend '%s' is not supported; sublet has only the native caching allocator", t)
			}
		case "max_split_size_mb":
			c.MaxSplitSize, err = p.mib(i, minSplitSizeMiB)
		case "max_non_split_rounding_mb":
			c.MaxNonSplitRounding, err = p.mib(i, minSplitSizeMiB)
		case "garbage_collection_threshold":
			var v float64
			if v, err = p.float(i); err == nil && !(v > 0 && v < 1) {
				err = p.errAt(i, "%v is invalid, set it in (0.0, 1.0)", v)
			}
			c.GarbageCollectionThreshold = v
		case "roundup_power2_divisions":
			i, err = p.divisions(i, &c.RoundupPower2Divisions)
		case "expandable_segments":
			c.ExpandableSegments, err = p.bool(i)
		case "policy":
			c.Policy, err = p.policy(i)
		case "per_process_memory_fraction":
			var v float64
			if v, err = p.float(i); err == nil {
				switch {
				case !(v >= 0 && v <= 1):
					err = p.errAt(i, "%v is invalid, set it in [0.0, 1.0]", v)
				case v == 0:
					// PyTorch accepts 0 (every new segment then fails); sublet's Config
					// uses 0 for "no fraction", so it cannot express that.
					err = p.errAt(i, "0 is not supported: it would forbid every device allocation; use a value in (0.0, 1.0]")
				}
			}
			c.PerProcessMemoryFraction = v
		case "pinned_use_cuda_host_register", "pinned_use_hip_host_register":
			c.Pinned.UseHostRegister, err = p.bool(i)
		case "pinned_num_register_threads":
			var v uint64
			if v, err = p.uint(i); err == nil {
				switch {
				case !isPow2(v):
					err = p.errAt(i, "%d threads: the number of register threads has to be a power of 2", v)
				case v > maxPinnedRegisterThreads:
					err = p.errAt(i, "%d threads: the number of register threads must be <= %d", v, maxPinnedRegisterThreads)
				}
			}
			c.Pinned.NumRegisterThreads = int(v)
		case "pinned_use_background_threads":
			c.Pinned.UseBackgroundThreads, err = p.bool(i)
		case "pinned_reserve_segment_size_mb":
			c.Pinned.ReserveSegmentSize, err = p.mib(i, 1)
		case "pinned_max_round_threshold_mb":
			c.Pinned.MaxRoundThreshold, err = p.mib(i, 1)
		case "pinned_max_cached_size_mb":
			c.Pinned.MaxCachedSize, err = p.mib(i, 1)
		case "pinned_free_catch_all":
			c.Pinned.FreeCatchAll, err = p.bool(i)
		default:
			if why, ok := unsupported[key]; ok {
				err = p.errAt(i-2, "this PyTorch option is not supported: %s", why)
			} else {
				err = p.errAt(i-2, "unrecognized key '%s' in allocator config", key)
			}
		}
		if err != nil {
			return Config{}, err
		}
		if i+1 < len(p.toks) {
			if err := p.expect(i+1, ","); err != nil {
				return Config{}, err
			}
			i++
		}
	}
	return c, nil
}

// divisions parses the value of roundup_power2_divisions starting at token i into d and
// returns the index of its last token. The list form follows PyTorch 2.11: a key K (MiB,
// a power of two) sets interval log2(K) (clamped to 0..15); the first key also fills
// every lower interval; '>' fills every interval after the last key so far; intervals
// not mentioned keep their value.
func (p *configParser) divisions(i int, d *[RoundupIntervals]int) (int, error) {
	t, err := p.tok(i, "a number of divisions or '['")
	if err != nil {
		return i, err
	}
	if t != "[" {
		v, err := p.uint(i)
		if err != nil {
			return i, err
		}
		if !isPow2(v) {
			return i, p.errAt(i, "%d divisions: the divisions have to be a power of 2", v)
		}
		for k := range d {
			d[k] = int(v)
		}
		return i, nil
	}
	first := true
	last := 0
	for {
		i++
		t, err := p.tok(i, "an interval or ']'")
		if err != nil {
			return i, err
		}
		if t == "]" {
			return i, nil
		}
		keyTok := i
		if err := p.expect(i+1, ":"); err != nil {
			return i, err
		}
		i += 2
		v, err := p.uint(i)
		if err != nil {
			return i, err
		}
		if v != 0 && !isPow2(v) {
			return i, p.errAt(i, "%d divisions: the divisions have to be a power of 2 or 0 to disable roundup", v)
		}
		if t == ">" {
			for k := last + 1; k < RoundupIntervals; k++ {
				d[k] = int(v)
			}
		} else {
			boundary, err := p.uint(keyTok)
			if err != nil {
				return i, err
			}
			if !isPow2(boundary) {
				return i, p.errAt(keyTok, "interval %d MiB: the intervals have to be powers of 2", boundary)
			}
			idx := min(bits.Len64(boundary)-1, RoundupIntervals-1)
			if first {
				for k := 0; k < idx; k++ {
					d[k] = int(v)
				}
				first = false
			}
			d[idx] = int(v)
			last = idx
		}
		t, err = p.tok(i+1, "',' or ']'")
		if err != nil {
			return i, err
		}
		if t != "]" {
			if err := p.expect(i+1, ","); err != nil {
				return i, err
			}
			i++
		}
	}
}

// badValue is the error about field key of a Go Config value.
func badValue(key, format string, args ...any) error {
	return &ConfigError{Key: key, Offset: -1, Msg: fmt.Sprintf(format, args...)}
}

// validate checks a Config value with the rules the parser applies, so that a Go value
// passed to New cannot do what a config string could not.
func (c Config) validate() error {
	if c.MaxSplitSize != 0 && c.MaxSplitSize < LargeBuffer {
		return badValue("MaxSplitSize", "%d bytes is too small; want 0 (unlimited) or at least %d (20 MiB)", c.MaxSplitSize, int64(LargeBuffer))
	}
	if c.MaxNonSplitRounding != 0 && c.MaxNonSplitRounding < LargeBuffer {
		return badValue("MaxNonSplitRounding", "%d bytes is too small; want 0 (default 20 MiB) or at least %d", c.MaxNonSplitRounding, int64(LargeBuffer))
	}
	for k, v := range c.RoundupPower2Divisions {
		if v < 0 || (v != 0 && !isPow2(uint64(v))) {
			return badValue("RoundupPower2Divisions", "entry %d is %d; want 0 (off) or a power of 2", k, v)
		}
	}
	if g := c.GarbageCollectionThreshold; g != 0 && !(g > 0 && g < 1) {
		return badValue("GarbageCollectionThreshold", "%v; want 0 (off) or a value in (0, 1)", g)
	}
	if f := c.PerProcessMemoryFraction; !(f >= 0 && f <= 1) {
		return badValue("PerProcessMemoryFraction", "%v; want 0 (none) or a value in (0, 1]", f)
	}
	if c.Policy >= numPolicies {
		return badValue("Policy", "%d; want PolicyPyTorch or PolicyPlanned", c.Policy)
	}
	return c.Pinned.Validate()
}

// Validate checks a PinnedConfig value with the rules the parser applies to the pinned_*
// keys, except that sizes may be any byte count, not only whole MiB. Errors are
// *ConfigError values naming the field.
func (c PinnedConfig) Validate() error {
	if n := c.NumRegisterThreads; n < 0 || n > maxPinnedRegisterThreads || (n != 0 && !isPow2(uint64(n))) {
		return badValue("Pinned.NumRegisterThreads", "%d; want 0 (default 1) or a power of 2 <= %d", n, maxPinnedRegisterThreads)
	}
	for _, f := range []struct {
		key  string
		size int64
	}{
		{"Pinned.ReserveSegmentSize", c.ReserveSegmentSize},
		{"Pinned.MaxRoundThreshold", c.MaxRoundThreshold},
		{"Pinned.MaxCachedSize", c.MaxCachedSize},
	} {
		if f.size < 0 {
			return badValue(f.key, "%d bytes; want 0 (off) or a positive size", f.size)
		}
	}
	return nil
}
