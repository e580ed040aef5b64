package memsnap

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/big"

	"github.com/subletml/sublet/alloc"
)

// Pickle opcodes (Python's pickletools names). The writer uses protocol 2 and only what
// dicts, lists, tuples, str, int, float, bool and None need, plus the memo to share
// repeated stacks; the reader also takes what protocols 3–5 add for those types (frames,
// short strings, MEMOIZE), which is what pickle.dump writes for a PyTorch snapshot.
const (
	opProto          = 0x80
	opFrame          = 0x95
	opStop           = '.'
	opMark           = '('
	opEmptyDict      = '}'
	opEmptyList      = ']'
	opEmptyTuple     = ')'
	opSetItem        = 's'
	opSetItems       = 'u'
	opAppend         = 'a'
	opAppends        = 'e'
	opTuple          = 't'
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opBinUnicode     = 'X'
	opShortBinUni    = 0x8c
	opBinUnicode8    = 0x8d
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opLong1          = 0x8a
	opBinFloat       = 'G'
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opNone           = 'N'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opBinGet         = 'h'
	opLongBinGet     = 'j'
	opMemoize        = 0x94
	opPop            = '0'
	opShortBinBytes  = 'C'
	opBinBytes       = 'B'
	opPickleProtocol = 2
)

// WritePickle writes s as a protocol-2 pickle of PyTorch's snapshot dictionary, which
// pickle.load, `python -m torch.cuda._memory_viz` and pytorch.org/memory_viz read. A
// stack shared by several blocks or events is written once and referenced.
func WritePickle(w io.Writer, s *Snapshot) error {
	p := pickler{w: bufio.NewWriter(w), memo: make(map[stackKey]uint32)}
	p.w.WriteByte(opProto)
	p.w.WriteByte(opPickleProtocol)
	p.value(s.tree())
	p.w.WriteByte(opStop)
	return p.w.Flush()
}

type pickler struct {
	w *bufio.Writer
	// memo maps a written stack to its memo slot.
	memo map[stackKey]uint32
	next uint32
}

// stackKey is a stack by identity: its first frame's address and its length (a
// prefix of a stack shares the address).
type stackKey struct {
	first *alloc.Frame
	n     int
}

func (p *pickler) value(v any) {
	w := p.w
	switch x := v.(type) {
	case dict:
		w.WriteByte(opEmptyDict)
		if len(x) == 0 {
			return
		}
		w.WriteByte(opMark)
		for _, it := range x {
			p.str(it.k)
			p.value(it.v)
		}
		w.WriteByte(opSetItems)
	case []any:
		w.WriteByte(opEmptyList)
		p.items(x)
	case tuple:
		if len(x) == 2 {
			p.value(x[0])
			p.value(x[1])
			w.WriteByte(opTuple2)
			return
		}
		w.WriteByte(opMark)
		for _, e := range x {
			p.value(e)
		}
		w.WriteByte(opTuple)
	case frames:
		p.frames(x)
	case string:
		p.str(x)
	case int64:
		p.int(big.NewInt(x))
	case uint64:
		p.int(new(big.Int).SetUint64(x))
	case float64:
		w.WriteByte(opBinFloat)
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], math.Float64bits(x))
		w.Write(b[:])
	case bool:
		if x {
			w.WriteByte(opNewTrue)
		} else {
			w.WriteByte(opNewFalse)
		}
	case nil:
		w.WriteByte(opNone)
	default:
		panic(fmt.Sprintf("memsnap: internal error: no pickle form for %T", v))
	}
}

func (p *pickler) items(l []any) {
	if len(l) == 0 {
		return
	}
	p.w.WriteByte(opMark)
	for _, e := range l {
		p.value(e)
	}
	p.w.WriteByte(opAppends)
}

// frames writes a stack, or a reference to the same stack written before (stacks of
// one site share their backing array).
func (p *pickler) frames(fs frames) {
	if len(fs) == 0 {
		p.w.WriteByte(opEmptyList)
		return
	}
	key := stackKey{&fs[0], len(fs)}
	if slot, ok := p.memo[key]; ok {
		p.w.WriteByte(opLongBinGet)
		p.u32(slot)
		return
	}
	p.w.WriteByte(opEmptyList)
	p.w.WriteByte(opLongBinPut)
	p.u32(p.next)
	p.memo[key] = p.next
	p.next++
	l := make([]any, len(fs))
	for i, f := range fs {
		l[i] = dict{{"filename", f.Filename}, {"line", int64(f.Line)}, {"name", f.Name}}
	}
	p.items(l)
}

func (p *pickler) u32(v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	p.w.Write(b[:])
}

func (p *pickler) str(s string) {
	p.w.WriteByte(opBinUnicode)
	p.u32(uint32(len(s)))
	p.w.WriteString(s)
}

// int writes BININT1, BININT2 or BININT when v fits, else LONG1 (little-endian two's
// complement, as short as it can be).
func (p *pickler) int(v *big.Int) {
	switch {
	case v.Sign() >= 0 && v.Cmp(big.NewInt(0xff)) <= 0:
		p.w.WriteByte(opBinInt1)
		p.w.WriteByte(byte(v.Int64()))
		return
	case v.Sign() >= 0 && v.Cmp(big.NewInt(0xffff)) <= 0:
		p.w.WriteByte(opBinInt2)
		p.w.WriteByte(byte(v.Int64()))
		p.w.WriteByte(byte(v.Int64() >> 8))
		return
	case v.IsInt64() && v.Int64() >= math.MinInt32 && v.Int64() <= math.MaxInt32:
		p.w.WriteByte(opBinInt)
		p.u32(uint32(int32(v.Int64())))
		return
	}
	b := twosComplement(v)
	p.w.WriteByte(opLong1)
	p.w.WriteByte(byte(len(b)))
	p.w.Write(b)
}

// twosComplement is v in little-endian two's complement, the fewest bytes that keep
// the sign.
func twosComplement(v *big.Int) []byte {
	n := v.BitLen()/8 + 1
	m := new(big.Int).Set(v)
	if v.Sign() < 0 {
		m.Add(m, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	be := m.FillBytes(make([]byte, n))
	for i, j := 0, len(be)-1; i < j; i, j = i+1, j-1 {
		be[i], be[j] = be[j], be[i]
	}
	return be
}

// PickleError is a pickle this package cannot read, at byte Offset.
type PickleError struct {
	Offset int64
	Msg    string
}

func (e *PickleError) Error() string { return fmt.Sprintf("pickle byte %d: %s", e.Offset, e.Msg) }

// ReadPickle reads a snapshot pickle: sublet's, or PyTorch's own (_dump_snapshot).
// Pickles that build objects other than dicts, lists, tuples, str, bytes, int, float,
// bool and None are refused with the offset of the opcode.
func ReadPickle(r io.Reader) (*Snapshot, error) {
	v, err := unpickle(bufio.NewReader(r))
	if err != nil {
		return nil, err
	}
	return fromTree(v)
}

type unpickler struct {
	r     *bufio.Reader
	off   int64
	stack []any
	marks []int
	memo  map[uint32]any
}

func unpickle(r *bufio.Reader) (any, error) {
	u := &unpickler{r: r, memo: make(map[uint32]any)}
	for {
		at := u.off
		op, err := u.byte()
		if err != nil {
			return nil, &PickleError{at, "unexpected end of data before STOP"}
		}
		done, err := u.step(op)
		if err != nil {
			if pe, ok := err.(*PickleError); ok {
				return nil, pe
			}
			return nil, &PickleError{at, fmt.Sprintf("opcode %#x: %v", op, err)}
		}
		if done {
			if len(u.stack) != 1 {
				return nil, &PickleError{at, fmt.Sprintf("STOP with %d values on the stack", len(u.stack))}
			}
			return u.stack[0], nil
		}
	}
}

func (u *unpickler) byte() (byte, error) {
	b, err := u.r.ReadByte()
	if err == nil {
		u.off++
	}
	return b, err
}

func (u *unpickler) bytes(n uint64) ([]byte, error) {
	if n > 1<<31 {
		return nil, fmt.Errorf("length %d is too large", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(u.r, b); err != nil {
		return nil, fmt.Errorf("truncated: %w", err)
	}
	u.off += int64(n)
	return b, nil
}

func (u *unpickler) uint(n int) (uint64, error) {
	b, err := u.bytes(uint64(n))
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

func (u *unpickler) push(v any) { u.stack = append(u.stack, v) }

func (u *unpickler) pop() (any, error) {
	if len(u.stack) == 0 {
		return nil, fmt.Errorf("stack underflow")
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

// popMark returns the values pushed since the last MARK and removes them and the mark.
func (u *unpickler) popMark() ([]any, error) {
	if len(u.marks) == 0 {
		return nil, fmt.Errorf("no MARK")
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := append([]any(nil), u.stack[m:]...)
	u.stack = u.stack[:m]
	return items, nil
}

func (u *unpickler) top() (any, error) {
	if len(u.stack) == 0 {
		return nil, fmt.Errorf("stack underflow")
	}
	return u.stack[len(u.stack)-1], nil
}

// setItems adds key/value pairs to the dict on top of the stack.
func (u *unpickler) setItems(kv []any) error {
	d, err := u.top()
	if err != nil {
		return err
	}
	m, ok := d.(map[string]any)
	if !ok {
		return fmt.Errorf("SETITEM(S) on %s", kind(d))
	}
	for i := 0; i+1 < len(kv); i += 2 {
		switch k := kv[i].(type) {
		case string:
			m[k] = kv[i+1]
		case int64:
			m[fmt.Sprint(k)] = kv[i+1]
		default:
			return fmt.Errorf("dict key of type %s", kind(kv[i]))
		}
	}
	return nil
}

// appendItems adds values to the list on top of the stack. The list is replaced on
// the stack (and in the memo) by the grown one.
func (u *unpickler) appendItems(vs []any) error {
	l, err := u.pop()
	if err != nil {
		return err
	}
	ll, ok := l.(*list)
	if !ok {
		return fmt.Errorf("APPEND(S) on %s", kind(l))
	}
	ll.v = append(ll.v, vs...)
	u.push(ll)
	return nil
}

// list is a list under construction: shared by reference, like Python's, so that a
// memoised list grows in place.
type list struct{ v []any }

func (u *unpickler) step(op byte) (bool, error) {
	switch op {
	case opProto:
		v, err := u.byte()
		if err != nil {
			return false, err
		}
		if v > 5 {
			return false, fmt.Errorf("protocol %d (this reader knows 2 to 5)", v)
		}
	case opFrame:
		_, err := u.uint(8)
		return false, err
	case opStop:
		v, err := u.pop()
		if err != nil {
			return false, err
		}
		u.push(resolve(v))
		return true, nil
	case opMark:
		u.marks = append(u.marks, len(u.stack))
	case opEmptyDict:
		u.push(map[string]any{})
	case opEmptyList:
		u.push(&list{})
	case opEmptyTuple:
		u.push([]any{})
	case opSetItem:
		v, err := u.pop()
		if err != nil {
			return false, err
		}
		k, err := u.pop()
		if err != nil {
			return false, err
		}
		return false, u.setItems([]any{k, v})
	case opSetItems:
		kv, err := u.popMark()
		if err != nil {
			return false, err
		}
		return false, u.setItems(kv)
	case opAppend:
		v, err := u.pop()
		if err != nil {
			return false, err
		}
		return false, u.appendItems([]any{v})
	case opAppends:
		vs, err := u.popMark()
		if err != nil {
			return false, err
		}
		return false, u.appendItems(vs)
	case opTuple:
		vs, err := u.popMark()
		if err != nil {
			return false, err
		}
		u.push(vs)
	case opTuple1, opTuple2, opTuple3:
		n := int(op-opTuple1) + 1
		if len(u.stack) < n {
			return false, fmt.Errorf("stack underflow")
		}
		t := append([]any(nil), u.stack[len(u.stack)-n:]...)
		u.stack = u.stack[:len(u.stack)-n]
		u.push(t)
	case opBinUnicode, opShortBinUni, opBinUnicode8, opShortBinBytes, opBinBytes:
		width := map[byte]int{opBinUnicode: 4, opShortBinUni: 1, opBinUnicode8: 8, opShortBinBytes: 1, opBinBytes: 4}[op]
		n, err := u.uint(width)
		if err != nil {
			return false, err
		}
		b, err := u.bytes(n)
		if err != nil {
			return false, err
		}
		u.push(string(b))
	case opBinInt:
		v, err := u.uint(4)
		if err != nil {
			return false, err
		}
		u.push(int64(int32(uint32(v))))
	case opBinInt1:
		v, err := u.uint(1)
		u.push(int64(v))
		return false, err
	case opBinInt2:
		v, err := u.uint(2)
		u.push(int64(v))
		return false, err
	case opLong1:
		n, err := u.uint(1)
		if err != nil {
			return false, err
		}
		b, err := u.bytes(n)
		if err != nil {
			return false, err
		}
		v, err := fromTwosComplement(b)
		if err != nil {
			return false, err
		}
		u.push(v)
	case opBinFloat:
		b, err := u.bytes(8)
		if err != nil {
			return false, err
		}
		u.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
	case opNewTrue, opNewFalse:
		u.push(op == opNewTrue)
	case opNone:
		u.push(nil)
	case opBinPut, opLongBinPut:
		n, err := u.uint(map[byte]int{opBinPut: 1, opLongBinPut: 4}[op])
		if err != nil {
			return false, err
		}
		v, err := u.top()
		u.memo[uint32(n)] = v
		return false, err
	case opMemoize:
		v, err := u.top()
		u.memo[uint32(len(u.memo))] = v
		return false, err
	case opBinGet, opLongBinGet:
		n, err := u.uint(map[byte]int{opBinGet: 1, opLongBinGet: 4}[op])
		if err != nil {
			return false, err
		}
		v, ok := u.memo[uint32(n)]
		if !ok {
			return false, fmt.Errorf("memo slot %d was never set", n)
		}
		u.push(v)
	case opPop:
		_, err := u.pop()
		return false, err
	default:
		return false, fmt.Errorf("unsupported opcode (a snapshot holds only dicts, lists, tuples, strings, numbers, bools and None)")
	}
	return false, nil
}

// fromTwosComplement reads a LONG1 payload as an int64 or uint64.
func fromTwosComplement(le []byte) (any, error) {
	be := make([]byte, len(le))
	for i, b := range le {
		be[len(le)-1-i] = b
	}
	v := new(big.Int).SetBytes(be)
	if len(be) > 0 && be[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(be))))
	}
	switch {
	case v.IsInt64():
		return v.Int64(), nil
	case v.IsUint64():
		return v.Uint64(), nil
	}
	return nil, fmt.Errorf("integer %v does not fit in 64 bits", v)
}

// resolve replaces the lists under construction by plain slices, in place, once
// (shared lists are resolved once and shared).
func resolve(v any) any {
	seen := make(map[*list][]any)
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case *list:
			if r, ok := seen[x]; ok {
				return r
			}
			out := make([]any, len(x.v))
			seen[x] = out
			for i, e := range x.v {
				out[i] = walk(e)
			}
			return out
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return walk(v)
}
