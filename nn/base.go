package nn

import (
	"fmt"
	"reflect"
	"strconv"

	"github.com/subletml/sublet/tensor"
)

// Base makes a struct of layers a Module, as subclassing torch.nn.Module does: embed it,
// write Forward, and make the module with Build. Its parameters and children are the
// struct's exported fields, found when they are asked for:
//
//   - a *tensor.Tensor field is a parameter of the module's own (a leaf made with
//     Init.Param or tensor's AsParameter);
//   - a field holding a Module (a layer, a Sequential, a struct that embeds Base) is a
//     child, whose parameters are named under it;
//   - a slice or array of those is a list (torch.nn.ModuleList, ParameterList), its
//     elements named by index;
//   - nil fields and fields of other types (sizes, settings) are not parameters.
//
// Names are PyTorch's state_dict keys for the same module written in Python with the
// field names as attributes: the field's name in snake case ("FC1" is "fc1",
// "HiddenLayer" "hidden_layer", "LNFinal" "ln_final"), or the name in an `nn:"name"`
// tag; `nn:"-"` leaves a field out. A module's own parameters come first, then its
// children's, in field order, as named_parameters lists them in the order __init__
// assigned them; a tensor found twice (tied weights) is listed once, under its first
// name.
//
// Base adds Training, the mode SetTraining set (self.training). Use a module by
// pointer: Build records the pointer, and a copy of the struct would still point at
// the original.
type Base struct {
	// Set by Build; like the rest of the module, used by one goroutine at a time.
	self Module // the module embedding this Base
	eval bool   // SetTraining(false) was called last; modules start in training mode
}

const opBuild = "nn.Build"

// Build readies m, a pointer to a struct that embeds Base and has a Forward method,
// and returns it: from now on m is a Module whose NamedParameters, SetTraining and
// Release cover its fields (see Base). It builds the children that embed Base too. It
// panics with a *tensor.Error for a struct whose modules it would not see: an
// unexported field holding a module or a tensor, a field of a struct type holding
// modules without being one, two fields of one name.
func Build[M Module](m M) M {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		panic(&tensor.Error{Op: opBuild, Msg: fmt.Sprintf("%T is not a pointer to a struct; build &MyModule{...}", m)})
	}
	b := baseOf(v.Elem())
	if b == nil {
		panic(&tensor.Error{Op: opBuild, Msg: fmt.Sprintf("%T does not embed nn.Base; add a field nn.Base to the struct", m)})
	}
	b.self = m
	names := map[string]string{}
	forFields(v.Elem(), func(f reflect.StructField, fv reflect.Value, name string) {
		if prev, ok := names[name]; ok {
			panic(&tensor.Error{Op: opBuild, Msg: fmt.Sprintf("%T: fields %s and %s are both named %q; give one another name with an nn tag",
				m, prev, f.Name, name)})
		}
		names[name] = f.Name
		buildChildren(fv)
	}, func(f reflect.StructField) {
		panic(&tensor.Error{Op: opBuild, Msg: fmt.Sprintf("%T: field %s holds modules or tensors but is unexported, so it would be left out; "+
			"export it (it is then named %q) or tag it nn:\"-\"", m, f.Name, snake(exported(f.Name)))})
	})
	return m
}

// baseOf returns the Base embedded in the struct v, or nil.
func baseOf(v reflect.Value) *Base {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Anonymous && f.Type == reflect.TypeFor[Base]() {
			return v.Field(i).Addr().Interface().(*Base)
		}
	}
	return nil
}

// forFields calls each for every exported field of the struct v that is not the
// embedded Base or tagged nn:"-", with its name, and hidden for every unexported field
// whose type holds modules or tensors.
func forFields(v reflect.Value, each func(f reflect.StructField, fv reflect.Value, name string), hidden func(f reflect.StructField)) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("nn")
		switch {
		case tag == "-" || f.Anonymous && f.Type == reflect.TypeFor[Base]():
		case !f.IsExported():
			if hidden != nil && holdsModules(f.Type, map[reflect.Type]bool{}) {
				hidden(f)
			}
		case tag != "":
			each(f, v.Field(i), tag)
		default:
			each(f, v.Field(i), snake(f.Name))
		}
	}
}

var (
	moduleType = reflect.TypeFor[Module]()
	tensorType = reflect.TypeFor[*tensor.Tensor]()
)

// holdsModules reports whether a value of type t is, or holds through slices, arrays,
// pointers and struct fields, a Module or a *tensor.Tensor.
func holdsModules(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == tensorType || t.Implements(moduleType) || reflect.PointerTo(t).Implements(moduleType) {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Pointer:
		return holdsModules(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsModules(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// buildChildren builds the modules in fv that embed Base and were not built, and
// panics for a struct that holds modules without being one.
func buildChildren(fv reflect.Value) {
	switch {
	case fv.Kind() == reflect.Slice || fv.Kind() == reflect.Array:
		for i := range fv.Len() {
			buildChildren(fv.Index(i))
		}
		return
	case fv.Kind() == reflect.Interface || fv.Kind() == reflect.Pointer:
		if fv.IsNil() {
			return
		}
	}
	m, ok := moduleOf(fv)
	if !ok {
		if fv.Type() != tensorType && holdsModules(fv.Type(), map[reflect.Type]bool{}) {
			panic(&tensor.Error{Op: opBuild, Msg: fmt.Sprintf("a field of type %v holds modules but is no Module, so they would be left out; "+
				"embed nn.Base in it and give it a Forward, or use a slice of modules", fv.Type())})
		}
		return
	}
	mv := reflect.ValueOf(m)
	if mv.Kind() == reflect.Pointer && mv.Elem().Kind() == reflect.Struct {
		if b := baseOf(mv.Elem()); b != nil && b.self == nil {
			Build(m)
		}
	}
}

// moduleOf returns the Module fv holds: fv itself, or its address when the Module's
// methods are on the pointer; ok is false when it holds none (or a nil one).
func moduleOf(fv reflect.Value) (Module, bool) {
	if (fv.Kind() == reflect.Interface || fv.Kind() == reflect.Pointer) && fv.IsNil() {
		return nil, false
	}
	if fv.Type().Implements(moduleType) {
		return fv.Interface().(Module), true
	}
	if fv.CanAddr() && fv.Addr().Type().Implements(moduleType) {
		return fv.Addr().Interface().(Module), true
	}
	return nil, false
}

// members calls param for every parameter of the module's own and child for every child,
// with their names: own parameters first, then children, each in field order.
func (b *Base) members(param func(name string, t *tensor.Tensor), child func(name string, m Module)) {
	if b.self == nil {
		panic(&tensor.Error{Op: "nn.Base", Msg: "the module was not made with nn.Build; make it with nn.Build(&MyModule{...})"})
	}
	var later []func()
	var walk func(fv reflect.Value, name string, top bool)
	walk = func(fv reflect.Value, name string, top bool) {
		switch {
		case fv.Type() == tensorType:
			if t := fv.Interface().(*tensor.Tensor); t != nil {
				if top {
					param(name, t)
				} else {
					later = append(later, func() { param(name, t) })
				}
			}
		case fv.Kind() == reflect.Slice || fv.Kind() == reflect.Array:
			for i := range fv.Len() {
				walk(fv.Index(i), name+"."+strconv.Itoa(i), false)
			}
		default:
			if m, ok := moduleOf(fv); ok {
				later = append(later, func() { child(name, m) })
			}
		}
	}
	forFields(reflect.ValueOf(b.self).Elem(), func(_ reflect.StructField, fv reflect.Value, name string) { walk(fv, name, true) }, nil)
	for _, f := range later {
		f()
	}
}

// NamedParameters lists the struct's parameters with their dotted names (see Base).
func (b *Base) NamedParameters() []Parameter {
	var ps []Parameter
	seen := map[*tensor.Tensor]bool{}
	add := func(p Parameter) {
		if !seen[p.Tensor] {
			seen[p.Tensor] = true
			ps = append(ps, p)
		}
	}
	b.members(func(name string, t *tensor.Tensor) { add(Parameter{Name: name, Tensor: t}) },
		func(name string, m Module) {
			for _, p := range prefixed(name, m.NamedParameters()) {
				add(p)
			}
		})
	return ps
}

// SetTraining sets the mode of the module (Training) and of every child.
func (b *Base) SetTraining(on bool) {
	b.members(func(string, *tensor.Tensor) {}, func(_ string, m Module) { m.SetTraining(on) })
	b.eval = !on
}

// Training reports the mode SetTraining set last (true for a new module): PyTorch's
// self.training, for a Forward that differs between training and evaluation.
func (b *Base) Training() bool { return !b.eval }

// Release releases every parameter of the module and of its children, and their
// gradients. Releasing again does nothing.
func (b *Base) Release() {
	b.members(func(_ string, t *tensor.Tensor) { t.Release() }, func(_ string, m Module) { m.Release() })
}

// snake is a Go field name in snake case, PyTorch's attribute style: an underscore
// before each capital that starts a word ("HiddenLayer" → "hidden_layer"), none inside
// an acronym ("FC1" → "fc1", "LNFinal" → "ln_final").
func snake(s string) string {
	upper := func(c byte) bool { return c >= 'A' && c <= 'Z' }
	lower := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if upper(c) {
			if i > 0 && (lower(s[i-1]) || upper(s[i-1]) && i+1 < len(s) && s[i+1] >= 'a' && s[i+1] <= 'z') {
				b = append(b, '_')
			}
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

// exported is name with its first letter upper case.
func exported(name string) string {
	if name != "" && name[0] >= 'a' && name[0] <= 'z' {
		return string(name[0]-'a'+'A') + name[1:]
	}
	return name
}
