package safetensors_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/safetensors"
	"github.com/subletml/sublet/tensor"
)

// Save a model's parameters and load them into another model of the same
// architecture, as torch's load_state_dict(load_file(path)) would.
func ExampleSaveModuleFile() {
	dev, _ := cpu.New(cpu.Options{Capacity: 64 << 20})
	sizes := nn.MLPConfig{Sizes: []int{4, 8, 3}}
	trained := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, sizes)
	fresh := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(2)}, sizes)
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	if err := safetensors.SaveModuleFile(path, trained, map[string]string{"epoch": "10"}); err != nil {
		fmt.Println(err)
	}
	f, _ := safetensors.Open(path)
	for _, info := range f.Tensors() { // in the order of their data: by element size, then by name
		fmt.Println(info.Name, info.DTypeName, info.Shape)
	}
	fmt.Println("epoch", f.Metadata()["epoch"])
	if err := safetensors.LoadModule(f.Reader, fresh); err != nil {
		fmt.Println(err)
	}
	f.Close()
	w1, w2 := nn.Parameters(trained)[0], nn.Parameters(fresh)[0]
	fmt.Println("same weights:", fmt.Sprint(tensor.ToSlice[float32](w1)) == fmt.Sprint(tensor.ToSlice[float32](w2)))
	trained.Release()
	fresh.Release()
	// Output:
	// 0.bias F32 [8]
	// 0.weight F32 [8 4]
	// 2.bias F32 [3]
	// 2.weight F32 [3 8]
	// epoch 10
	// same weights: true
}
