package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/device/sim"
	kcuda "github.com/subletml/sublet/kernels/cuda"
)

// runInfo prints the devices, the default device and the allocator settings in force.
// A missing GPU is information, not an error; a bad SUBLET_DEVICE or SUBLET_ALLOC_CONF
// is an error, reported after everything that could be printed.
func runInfo(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("info", "sublet info", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	infoCUDA(stdout)
	infoBLAS(stdout)
	infoCPU(stdout)
	fmt.Fprintf(stdout, "sim     simulated H200, no GPU needed: %s total\n", mibString(sim.DefaultCapacity))

	var errs []error
	env := os.Getenv(named.EnvVar)
	how := named.EnvVar + " unset: cuda:0 when usable, else cpu"
	if env != "" {
		how = fmt.Sprintf("%s=%q", named.EnvVar, env)
	}
	dev, err := named.Default()
	if err != nil {
		fmt.Fprintf(stdout, "\ndefault device: none: %v\n", err)
		errs = append(errs, err)
	} else {
		fmt.Fprintf(stdout, "\ndefault device: %s (%s)\n", dev.Name(), how)
	}

	conf := os.Getenv(alloc.ConfigEnv)
	cfg, err := alloc.ConfigFromEnv()
	if err != nil {
		fmt.Fprintf(stdout, "\nallocator settings: %s=%q is not valid: %v\n", alloc.ConfigEnv, conf, err)
		return errors.Join(append(errs, err)...)
	}
	if dev != nil {
		// The configuration the default device's allocator gets when it is created: a
		// device that cannot support expandable segments turns them off.
		a, err := alloc.New(dev, cfg)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if cfg.ExpandableSegments && !a.Config().ExpandableSegments {
			fmt.Fprintf(stdout, "\nexpandable segments are off on %s: it has no virtual memory management\n", dev.Name())
		}
		cfg = a.Config()
	}
	if w := gcThresholdWarning(cfg, 0); w != "" {
		fmt.Fprintf(stdout, "\nwarning: %s\n", w)
	}
	b, err := allocatorSettings(conf, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nallocator settings (%s; keys of PyTorch's memory snapshot \"allocator_settings\", then sublet's others):\n%s\n", alloc.ConfigEnv, b)
	return errors.Join(errs...)
}

// gcThresholdWarning says why cfg's garbage_collection_threshold does nothing, or ""
// when it is off or armed: the allocator reclaims cached blocks against the memory a
// fraction allows, so without one (per_process_memory_fraction in cfg, or fraction, a
// fraction the caller sets at run time) it never collects, in PyTorch as here.
func gcThresholdWarning(cfg alloc.Config, fraction float64) string {
	if cfg.GarbageCollectionThreshold == 0 || cfg.PerProcessMemoryFraction > 0 || fraction > 0 {
		return ""
	}
	return fmt.Sprintf("garbage_collection_threshold:%g does nothing without a memory fraction: the threshold is a share of the memory the fraction allows. "+
		"Set per_process_memory_fraction in %s as well (or call SetMemoryFraction in the program), or drop it", cfg.GarbageCollectionThreshold, alloc.ConfigEnv)
}

// infoCUDA prints the driver and every GPU, or why there are none.
func infoCUDA(w io.Writer) {
	n, err := cuda.Count()
	if err != nil {
		fmt.Fprintf(w, "cuda    none: %s\n", oneLine(err))
		return
	}
	driver := ""
	if v := kernelDriverVersion(); v != "" {
		driver = "driver " + v + ", "
	}
	if v, err := cuda.DriverVersion(); err == nil {
		driver += fmt.Sprintf("supports CUDA %d.%d, ", v/1000, v%1000/10)
	}
	fmt.Fprintf(w, "cuda    %s%d GPU(s)\n", driver, n)
	for i := range n {
		infoGPU(w, i)
	}
}

// infoBLAS says which cuBLAS the GPU's products run on, or that they run on sublet's
// fallback kernel and why.
func infoBLAS(w io.Writer) {
	s, err := kcuda.BLAS()
	if err != nil {
		fmt.Fprintf(w, "cublas  none: GPU matrix products run on sublet's fallback kernel (slow): %s\n", oneLine(err))
		return
	}
	fmt.Fprintf(w, "cublas  %s: GPU matrix products run there\n", s)
}

// oneLine is err's message on one line: a list of reasons, one per indented line after
// a colon (a loader's, one per library it tried), joined by semicolons.
func oneLine(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	if len(lines) == 1 {
		return lines[0]
	}
	return lines[0] + " " + strings.Join(lines[1:], "; ")
}

func infoGPU(w io.Writer, ordinal int) {
	d, err := cuda.Open(ordinal)
	if err != nil {
		fmt.Fprintf(w, "  cuda:%d  cannot be opened: %v\n", ordinal, err)
		return
	}
	defer d.Close()
	p := d.Properties()
	free, total, err := d.MemInfo()
	mem := fmt.Sprintf("memory %s total, %s free", mibString(total), mibString(free))
	if err != nil {
		mem = fmt.Sprintf("memory %s total, free unknown: %v", mibString(p.TotalMemory), err)
	}
	vmm := "no virtual memory management (expandable segments off)"
	if p.VirtualMemory {
		vmm = "VMM granularity " + mibString(d.Granularity())
	}
	fmt.Fprintf(w, "  %s  %s  compute capability %d.%d  %d SMs  %s  %s  PCI %04x:%02x:%02x\n",
		d.Name(), p.Name, p.ComputeMajor, p.ComputeMinor, p.Multiprocessors, mem, vmm, p.PCIDomain, p.PCIBus, p.PCIDevice)
}

// kernelDriverRE finds the version in /proc/driver/nvidia/version's first line, which
// reads "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release
// Build ..." (older drivers: "... x86_64 Kernel Module  535.104.05  Sat Aug ...").
var kernelDriverRE = regexp.MustCompile(`Kernel Module.*?\s(\d+\.\d+(?:\.\d+)?)\s`)

// kernelDriverVersion returns the NVIDIA kernel driver's version ("580.159.04"), or ""
// where the file is missing.
func kernelDriverVersion() string {
	b, err := os.ReadFile("/proc/driver/nvidia/version")
	if err != nil {
		return ""
	}
	return parseDriverVersion(b)
}

func parseDriverVersion(b []byte) string {
	if m := kernelDriverRE.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

func infoCPU(w io.Writer) {
	d, err := cpu.New(cpu.Options{})
	if err != nil {
		fmt.Fprintf(w, "cpu     cannot be opened: %v\n", err)
		return
	}
	free, total, err := d.MemInfo()
	if err != nil {
		fmt.Fprintf(w, "cpu     %d cores, memory unknown: %v\n", runtime.NumCPU(), err)
		return
	}
	fmt.Fprintf(w, "cpu     host memory: %s total, %s available, %d cores\n", mibString(total), mibString(free), runtime.NumCPU())
}

func mibString(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
}

// allocatorSettings renders cfg as an indented JSON object: first the keys PyTorch's
// torch.cuda.memory_snapshot() reports under "allocator_settings", in its order and
// units (bytes; max_split_size -1 when unlimited; roundup_power2_divisions keyed by the
// interval's lower bound in MiB), then the settings sublet parses that PyTorch leaves
// out of that list.
func allocatorSettings(conf string, cfg alloc.Config) ([]byte, error) {
	maxSplit := cfg.MaxSplitSize
	if maxSplit == 0 {
		maxSplit = -1
	}
	nonSplit := cfg.MaxNonSplitRounding
	if nonSplit == 0 {
		nonSplit = alloc.LargeBuffer
	}
	threads := cfg.Pinned.NumRegisterThreads
	if threads == 0 {
		threads = 1
	}
	var roundup []kv
	for i, d := range cfg.RoundupPower2Divisions {
		roundup = append(roundup, kv{strconv.Itoa(1 << i), d})
	}
	return orderedJSON([]kv{
		{alloc.ConfigEnv, conf},
		{"max_split_size", maxSplit},
		{"garbage_collection_threshold", cfg.GarbageCollectionThreshold},
		{"expandable_segments", cfg.ExpandableSegments},
		{"pinned_num_register_threads", threads},
		{"release_lock_on_cudamalloc", false}, // sublet always holds its lock around device allocation
		{"pinned_use_cuda_host_register", cfg.Pinned.UseHostRegister},
		{"roundup_power2_divisions", roundup},
		{"max_non_split_rounding", nonSplit},
		{"per_process_memory_fraction", cfg.PerProcessMemoryFraction},
		{"pinned_use_background_threads", cfg.Pinned.UseBackgroundThreads},
		{"pinned_reserve_segment_size", cfg.Pinned.ReserveSegmentSize},
		{"pinned_max_round_threshold", cfg.Pinned.MaxRoundThreshold},
		{"pinned_max_cached_size", cfg.Pinned.MaxCachedSize},
		{"pinned_free_catch_all", cfg.Pinned.FreeCatchAll},
		{"policy", cfg.Policy.String()}, // sublet's own: pytorch or planned (docs/allocator.md)
	})
}

// kv is one key of an ordered JSON object; a value of type []kv is a nested one.
type kv struct {
	key   string
	value any
}

// orderedJSON encodes kvs as an indented JSON object with the keys in order, which a
// Go map would not keep.
func orderedJSON(kvs []kv) ([]byte, error) {
	var b bytes.Buffer
	if err := writeObject(&b, kvs); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func writeObject(b *bytes.Buffer, kvs []kv) error {
	b.WriteByte('{')
	for i, e := range kvs {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeValue(b, e.key); err != nil {
			return err
		}
		b.WriteByte(':')
		var err error
		if nested, ok := e.value.([]kv); ok {
			err = writeObject(b, nested)
		} else {
			err = writeValue(b, e.value)
		}
		if err != nil {
			return fmt.Errorf("allocator setting %s: %w", e.key, err)
		}
	}
	b.WriteByte('}')
	return nil
}

// writeValue writes v as JSON, leaving <, > and & as they are: a config string such as
// "roundup_power2_divisions:[256:4,>:8]" reads as typed.
func writeValue(b *bytes.Buffer, v any) error {
	e := json.NewEncoder(b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}
