package cpu

import (
	"fmt"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Compare writes op(a, b) into the Bool dst, elementwise; a and b broadcast to dst's
// shape. in is the type they are compared in (kernels.CompareType): I64 compares
// integer and Bool operands exactly; a floating type rounds each value of another type
// to it once and compares the results (NaN is equal to nothing, so Ne is true for it).
func Compare(op kernels.CompareOp, in dtype.DType, dst, a, b Operand) {
	name := op.String()
	if !op.Valid() {
		panic(fmt.Sprintf("kernels/cpu: unknown %v", op))
	}
	requireBool(name, dst)
	ints := in == dtype.I64
	if ints && (!isInt(a.dt) || !isInt(b.dt)) {
		panic(fmt.Sprintf("kernels/cpu: %s: an integer comparison of %v and %v; compare them in their floating type", name, a.dt, b.dt))
	}
	if !ints && !in.IsFloat() {
		panic(fmt.Sprintf("kernels/cpu: %s: comparing in %v, which is neither I64 nor floating", name, in))
	}
	it := newIter(name, dst.Layout, a.Layout, b.Layout)
	parallelFor(it.size, grain, func(lo, hi int) {
		var r [chunk]uint8
		var ia, ib [chunk]int64
		var fa, fb [chunk]float64
		it.walk(lo, hi, func(offs, inner [maxOperands]int, n int) {
			res := r[:n]
			if ints {
				compareRun(op, res, loadInts(a, offs[1], inner[1], n, &ia), loadInts(b, offs[2], inner[2], n, &ib))
			} else {
				compareRun(op, res, loadIn(&a, in, offs[1], inner[1], n, &fa), loadIn(&b, in, offs[2], inner[2], n, &fb))
			}
			copyRun(dst.u8s(), offs[0], inner[0], res, 0, 1, n)
		})
	})
}

// requireBool panics unless o is a writable Bool output.
func requireBool(op string, o Operand) {
	o.requireWritable(op)
	if o.dt != dtype.Bool {
		panic(fmt.Sprintf("kernels/cpu: %s: output must be bool, not %v", op, o.dt))
	}
}

// loadIn is load of n elements as float64, each rounded once to in unless in holds
// the operand's values exactly already.
func loadIn(o *Operand, in dtype.DType, off, s, n int, buf *[chunk]float64) []float64 {
	v := load(o, off, s, n, buf)
	if holdsFloat(in, o.dt) {
		return v
	}
	if &v[0] != &buf[0] {
		v = buf[:copy(buf[:n], v)]
	}
	for i, x := range v {
		v[i] = in.Round(x)
	}
	return v
}

// holdsFloat reports whether every value of dt is a value of the floating type in.
func holdsFloat(in, dt dtype.DType) bool {
	switch in {
	case dtype.F64:
		return dt.IsFloat() || dt == dtype.I32 || dt == dtype.Bool
	case dtype.F32:
		return dt == dtype.F32 || dt == dtype.F16 || dt == dtype.BF16 || dt == dtype.Bool
	}
	return dt == in || dt == dtype.Bool
}

func compareRun[T int64 | float64](op kernels.CompareOp, dst []uint8, a, b []T) {
	switch op {
	case kernels.Eq:
		for i := range dst {
			dst[i] = boolByte(a[i] == b[i])
		}
	case kernels.Ne:
		for i := range dst {
			dst[i] = boolByte(a[i] != b[i])
		}
	case kernels.Lt:
		for i := range dst {
			dst[i] = boolByte(a[i] < b[i])
		}
	case kernels.Le:
		for i := range dst {
			dst[i] = boolByte(a[i] <= b[i])
		}
	case kernels.Gt:
		for i := range dst {
			dst[i] = boolByte(a[i] > b[i])
		}
	case kernels.Ge:
		for i := range dst {
			dst[i] = boolByte(a[i] >= b[i])
		}
	}
}

// Where writes a where cond is true (not 0) and b where it is 0 into dst; cond, a and
// b broadcast to dst's shape. A floating dst takes the values as Binary reads its
// operands (in float64 when one of dst, a and b is F64, else in float32), rounded once
// to dst's type; an integer or Bool dst takes integer or Bool a and b, converted as
// Copy converts integers. dst may be a or b itself, not otherwise overlap them.
func Where(dst, cond, a, b Operand) {
	const op = "where"
	if dst.dt.IsFloat() {
		byType(where[float32], where[float64], dst.dt, a.dt, b.dt)(dst, cond, a, b)
		return
	}
	dst.requireWritable(op)
	if !isInt(a.dt) || !isInt(b.dt) {
		panic(fmt.Sprintf("kernels/cpu: %s: a %v output of %v and %v operands; an integer output takes integers", op, dst.dt, a.dt, b.dt))
	}
	it := newIter(op, dst.Layout, cond.Layout, a.Layout, b.Layout)
	parallelFor(it.size, grain, func(lo, hi int) {
		var c, x, y [chunk]int64
		it.walk(lo, hi, func(offs, inner [maxOperands]int, n int) {
			cv := loadInts(cond, offs[1], inner[1], n, &c)
			xv := loadInts(a, offs[2], inner[2], n, &x)
			yv := loadInts(b, offs[3], inner[3], n, &y)
			for i, t := range cv {
				if t == 0 {
					xv[i] = yv[i]
				}
			}
			storeInts(dst, offs[0], inner[0], xv)
		})
	})
}

func where[T float](dst, cond, a, b Operand) {
	elementwise("where", dst, []Operand{cond, a, b}, whereKernel[T]{})
}

type whereKernel[T float] struct{}

func (whereKernel[T]) run(out []T, in eltIns[T]) {
	c, x, y := in[0][:len(out)], in[1][:len(out)], in[2][:len(out)]
	for i := range out {
		if c[i] != 0 {
			out[i] = x[i]
		} else {
			out[i] = y[i]
		}
	}
}

// sumInts writes into the I64 dst the exact sum of the integer or Bool src over the
// dimensions dst reduces (as Sum), wrapping as int64 arithmetic does.
func sumInts(dst, src Operand) {
	const op = "sum"
	dst.requireWritable(op)
	if !isInt(src.dt) {
		panic(fmt.Sprintf("kernels/cpu: %s: an int64 sum of %v; sum floats into a floating output", op, src.dt))
	}
	rd := newReduction(op, dst.Layout, src.Layout)
	ri := &rd.red
	parallelFor(rd.nOut, max(1, grain/max(rd.nRed, 1)), func(lo, hi int) {
		var buf [chunk]int64
		var sums [chunk]int64
		rd.kept.walk(lo, hi, func(offs, inner [maxOperands]int, n int) {
			for j := range n {
				var s int64
				ri.walk(0, rd.nRed, func(ro, rs [maxOperands]int, m int) {
					for _, v := range loadInts(src, offs[1]+j*inner[1]+ro[0], rs[0], m, &buf) {
						s += v
					}
				})
				sums[j] = s
			}
			storeInts(dst, offs[0], inner[0], sums[:n])
		})
	})
}
