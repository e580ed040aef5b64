package safetensors

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// moduleTensors names m's parameters as NamedParameters does: PyTorch's state_dict
// keys for the same architecture ("0.weight", "0.bias", …).
func moduleTensors(m nn.Module) []Named {
	var ts []Named
	for _, p := range m.NamedParameters() {
		ts = append(ts, Named{Name: p.Name, Tensor: p.Tensor})
	}
	return ts
}

// withFormat is metadata with "format": "pt", as safetensors' own save_model writes it
// (some loaders look for it), unless metadata sets a format.
func withFormat(metadata map[string]string) map[string]string {
	m := maps.Clone(metadata)
	if m == nil {
		m = map[string]string{}
	}
	if _, ok := m["format"]; !ok {
		m["format"] = "pt"
	}
	return m
}

// SaveModule writes m's parameters to w under their names (nn.Module's
// NamedParameters, which are PyTorch's state_dict keys), with metadata and "format":
// "pt": what torch's model.load_state_dict(safetensors.torch.load_file(path)) takes.
func SaveModule(w io.Writer, m nn.Module, metadata map[string]string) error {
	return Write(w, moduleTensors(m), withFormat(metadata))
}

// SaveModuleFile is SaveModule to the file at path (see WriteFile).
func SaveModuleFile(path string, m nn.Module, metadata map[string]string) error {
	return writeFile(path, func(w io.Writer) error { return SaveModule(w, m, metadata) })
}

// LoadModule reads m's parameters from r in place, strictly as
// load_state_dict(strict=True): every parameter must be in the file with its exact
// shape and type, and the file must hold no other tensor. Everything is checked
// before the first parameter is written; a failure while writing (a read error) may
// leave some parameters loaded.
func LoadModule(r *Reader, m nn.Module) error {
	ts := moduleTensors(m)
	want := map[string]bool{}
	var missing, unexpected, mismatched []string
	for _, t := range ts {
		want[t.Name] = true
		info, ok := r.Info(t.Name)
		if !ok {
			missing = append(missing, t.Name)
			continue
		}
		if fits(info, t.Tensor) != nil {
			mismatched = append(mismatched, fmt.Sprintf("%q is %s %v in the file, %v %v here", t.Name, info.DTypeName, info.Shape,
				t.Tensor.DType(), t.Tensor.Shape()))
		}
	}
	for _, info := range r.tensors {
		if !want[info.Name] {
			unexpected = append(unexpected, info.Name)
		}
	}
	if len(missing)+len(unexpected)+len(mismatched) > 0 {
		return fmt.Errorf("safetensors: LoadModule: the file does not hold the module's parameters: missing %q, unexpected %q, "+
			"mismatched [%s]", missing, unexpected, strings.Join(mismatched, "; "))
	}
	for _, t := range ts {
		if err := r.LoadInto(t.Tensor, t.Name); err != nil {
			return err
		}
	}
	return nil
}

// LoadModuleFile is LoadModule from the file at path: PyTorch's
// model.load_state_dict(load_file(path)).
func LoadModuleFile(path string, m nn.Module) error {
	return readFile(path, func(r *Reader) error { return LoadModule(r, m) })
}

// readFile opens the file at path, runs read on it and closes it.
func readFile(path string, read func(r *Reader) error) error {
	f, err := Open(path)
	if err != nil {
		return err
	}
	err = read(f.Reader)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// The metadata keys of an optimizer file.
const (
	metaOptimizer   = "optimizer"
	metaParamGroups = "param_groups"
)

// SaveOptimizer writes o's state (optim.StateDict) to w: each state tensor as
// "state.<i>.<name>" (i the parameter's index in Params, name PyTorch's:
// momentum_buffer, exp_avg, exp_avg_sq, step), the optimizer's kind under the
// metadata key "optimizer" and its param_groups as JSON under "param_groups", with
// metadata. In Python:
//
//	with safe_open(path, "pt") as f:
//	    groups = json.loads(f.metadata()["param_groups"])
//	    state = {}
//	    for k in f.keys():
//	        _, i, name = k.split(".", 2)
//	        state.setdefault(int(i), {})[name] = f.get_tensor(k)
//	opt.load_state_dict({"state": state, "param_groups": groups})
func SaveOptimizer(w io.Writer, o optim.Optimizer, metadata map[string]string) error {
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	var sd optim.StateDict
	if err := tensor.Try(func() { sd = o.StateDict(s) }); err != nil {
		return fmt.Errorf("safetensors: SaveOptimizer: %w", err)
	}
	groups, err := json.Marshal(sd.Groups)
	if err != nil {
		return fmt.Errorf("safetensors: SaveOptimizer: the param_groups: %w", err)
	}
	m := withFormat(metadata)
	m[metaOptimizer], m[metaParamGroups] = sd.Kind, string(groups)
	var ts []Named
	for _, i := range slices.Sorted(maps.Keys(sd.State)) {
		st := sd.State[i]
		for _, name := range slices.Sorted(maps.Keys(st)) {
			ts = append(ts, Named{Name: "state." + strconv.Itoa(i) + "." + name, Tensor: st[name]})
		}
	}
	return Write(w, ts, m)
}

// SaveOptimizerFile is SaveOptimizer to the file at path (see WriteFile).
func SaveOptimizerFile(path string, o optim.Optimizer, metadata map[string]string) error {
	return writeFile(path, func(w io.Writer) error { return SaveOptimizer(w, o, metadata) })
}

// LoadOptimizer replaces o's state and hyper-parameters by those SaveOptimizer wrote
// (or a Python writer laid out the same way): each state tensor goes to its
// parameter's device, then o.LoadStateDict checks and copies everything (nothing
// changes on an error).
func LoadOptimizer(r *Reader, o optim.Optimizer) error {
	meta := r.Metadata()
	kind, ok := meta[metaOptimizer]
	if !ok {
		return fmt.Errorf("safetensors: LoadOptimizer: the file has no %q metadata; it holds no optimizer state", metaOptimizer)
	}
	sd := optim.StateDict{Kind: kind, State: map[int]map[string]*tensor.Tensor{}}
	if err := json.Unmarshal([]byte(meta[metaParamGroups]), &sd.Groups); err != nil {
		return fmt.Errorf("safetensors: LoadOptimizer: the %q metadata: %w", metaParamGroups, err)
	}
	params := o.Params()
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	for _, info := range r.tensors {
		rest, ok := strings.CutPrefix(info.Name, "state.")
		is, name, ok2 := strings.Cut(rest, ".")
		i, err := strconv.Atoi(is)
		if !ok || !ok2 || err != nil || name == "" {
			return fmt.Errorf("safetensors: LoadOptimizer: tensor %q is not named state.<index>.<name>", info.Name)
		}
		if i < 0 || i >= len(params) {
			return fmt.Errorf("safetensors: LoadOptimizer: tensor %q is for parameter %d; the optimizer has %d", info.Name, i, len(params))
		}
		t, err := r.Load(s, params[i].Device(), info.Name)
		if err != nil {
			return err
		}
		if sd.State[i] == nil {
			sd.State[i] = map[string]*tensor.Tensor{}
		}
		sd.State[i][name] = t
	}
	if err := o.LoadStateDict(sd); err != nil {
		return fmt.Errorf("safetensors: LoadOptimizer: %w", err)
	}
	return nil
}

// LoadOptimizerFile is LoadOptimizer from the file at path.
func LoadOptimizerFile(path string, o optim.Optimizer) error {
	return readFile(path, func(r *Reader) error { return LoadOptimizer(r, o) })
}
