//go:build !amd64 && !arm64

package cpu

// relax is the spin-wait hint of relax_asm.go; this architecture's loop goes without.
func relax() {}
