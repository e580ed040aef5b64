package kernels

// Meta is the backend of a device that keeps no data (the simulated device without a
// backing store): every kernel computes nothing. Memory is still accounted exactly,
// since the tensor package allocates every output and temporary before it calls a
// kernel, so a full-size model's memory at named moments is proved in milliseconds.
// Nothing can be read back: NonFinite reports false, errors that depend on data never
// arise.
func Meta() Backend { return meta{} }

type meta struct{}

func (meta) Name() string                                                     { return "meta" }
func (meta) Unary(UnaryOp, Operand, Operand)                                  {}
func (meta) UnaryBackward(UnaryOp, Operand, Operand, Operand)                 {}
func (meta) Binary(BinaryOp, Operand, Operand, Operand)                       {}
func (meta) BinaryBackward(BinaryOp, Arg, Operand, Operand, Operand, Operand) {}
func (meta) Copy(Operand, Operand)                                            {}
func (meta) Fill(Operand, float64)                                            {}
func (meta) Axpy(Operand, float64, Operand)                                   {}
func (meta) DropoutMask(Operand, float64, uint64)                             {}
func (meta) Dropout(Operand, Operand, Operand, float64)                       {}
func (meta) Sum(Operand, Operand)                                             {}
func (meta) Mean(Operand, Operand)                                            {}
func (meta) SumSquares(Operand, Operand)                                      {}
func (meta) Max(Operand, Operand, Operand)                                    {}
func (meta) MaxBackward(Operand, Operand, Operand)                            {}
func (meta) Matmul(Operand, Operand, Operand)                                 {}
func (meta) Softmax(Operand, Operand, int, int, int)                          {}
func (meta) LogSoftmax(Operand, Operand, int, int, int)                       {}
func (meta) SoftmaxBackward(Operand, Operand, Operand, int, int, int)         {}
func (meta) LogSoftmaxBackward(Operand, Operand, Operand, int, int, int)      {}
func (meta) LayerNorm(Operand, Operand, Operand, Operand, Operand, Operand, int, int, float64) {
}
func (meta) LayerNormBackward(Operand, Operand, Operand, Operand, Operand, Operand, Operand, Operand, int, int) {
}
func (meta) CrossEntropy(Operand, Operand, Operand, Operand, int, int, int64) error { return nil }
func (meta) CrossEntropyBackward(Operand, Operand, Operand, Operand, Operand, int, int, int64) {
}
func (meta) MSE(Operand, Operand, Operand)                           {}
func (meta) MSEBackward(Operand, Operand, Operand, Operand, Operand) {}
func (meta) Embedding(Operand, Operand, Operand, int) error          { return nil }
func (meta) EmbeddingBackward(Operand, Operand, Operand, int) error  { return nil }
func (meta) SGD(SGD, Operand, Operand, Operand, bool)                {}
func (meta) Adam(Adam, int, Operand, Operand, Operand, Operand)      {}
func (meta) Unscale(Operand, float64, Operand)                       {}
func (meta) NonFinite(Operand) bool                                  { return false }

// The multi-tensor steps.
func (meta) SGDMulti(SGD, []Operand, []Operand, []Operand, []bool)             {}
func (meta) AdamMulti(Adam, []int, []Operand, []Operand, []Operand, []Operand) {}
func (meta) AdamMultiCapturable(Adam, Operand, Operand, []int, []Operand, []Operand, []Operand, []Operand) {
}
func (meta) UnscaleMulti([]Operand, float64, Operand) {}

// The losses of binary classification.
func (meta) BinaryCrossEntropy(Operand, Operand, Operand) error                 { return nil }
func (meta) BinaryCrossEntropyBackward(Arg, Operand, Operand, Operand, Operand) {}
func (meta) BinaryCrossEntropyWithLogits(Operand, Operand, Operand, Operand)    {}
func (meta) BinaryCrossEntropyWithLogitsBackward(Arg, Operand, Operand, Operand, Operand, Operand) {
}

func (meta) Addc(BinaryOp, Operand, Operand, Operand, Operand, float64) {}

// Comparisons and selection.
func (meta) Compare(CompareOp, Operand, Operand, Operand) {}
func (meta) Where(Operand, Operand, Operand, Operand)     {}
