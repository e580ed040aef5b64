//go:build !amd64

package cpu

import "github.com/subletml/sublet/kernels"

// Without the amd64 vector loops, vec.go's Go loops do everything.

func binaryVector[T float](op kernels.BinaryOp, dst, a, b []T) int { return 0 }

func sumLanesVector[T float](acc *[16]float64, x []T) int { return 0 }

func sumSquaresLanesVector[T float](acc *[16]float64, x []T) int { return 0 }

func sumRowsVector[T float](dst []float64, x []T, ld, n int, square bool) int { return 0 }

func sumRowPairsVector[T float](dst []float64, x []T, ld, n int, square bool) int { return 0 }

func narrowVector[T float](dst []T, src []float64) int { return 0 }

func addRowsVector[T float](acc []float64, x []T, ld, rows int) int { return 0 }

func maxLanesVector[T float](m []T, pos []int, x []T, ld, n int) int { return 0 }

func maxColsVector[T float](m, pos, x []T, ld, rows int) int { return 0 }

func reluVector[T float](dst, x []T) int { return 0 }

func reluGradVector[T float](dst, g, y []T) int { return 0 }
