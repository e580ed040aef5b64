package p

import (
	safetensors "github.com/subletml/sublet/safetensors"
)

func _() {
{
//line safetensors/format.go:8
err := safetensors.SaveModuleFile("model.safetensors", model, nil) // state_dict's keys
err = safetensors.LoadModuleFile("model.safetensors", model)       // strict: every name, shape, type
f, err := safetensors.Open("model.safetensors")                    // one tensor, or the metadata
w, err := f.Load(step, dev, "0.weight")                            // a tensor owned by step
err = f.Close()
}
}
