package replay

// Training-shaped generators: what a framework's forward, backward and optimizer step
// ask of the allocator.

const f32, f16 = 4, 2 // bytes per element

// linear is one layer's parameters and their optimizer state.
type linear struct {
	in, out      int64
	w, b         int64   // param ids
	gw, gb       int64   // grad ids, -1 while none
	state        []int64 // Adam exp_avg and exp_avg_sq of w and b, once allocated
	wSize, bSize int64
}

// genTrain: an MLP trained with Adam for 40 steps; every 10th step is followed by a
// no_grad eval forward.
func genTrain(b *builder) {
	r := b.r
	n := int(r.between(6, 10))
	widths := make([]int64, n+1)
	widths[0] = pick(r, int64(784), 1024, 3072)
	for i := 1; i < n; i++ {
		widths[i] = pick(r, int64(256), 512, 768, 1024, 2048, 3072, 4096)
	}
	widths[n] = pick(r, int64(10), 100, 1000)
	batch := pick(r, int64(64), 128, 256, 512)

	layers := make([]*linear, n)
	for i := range layers {
		l := &linear{in: widths[i], out: widths[i+1], gw: -1, gb: -1}
		l.wSize, l.bSize = l.in*l.out*f32, l.out*f32
		l.w, l.b = b.alloc(l.wSize), b.alloc(l.bSize)
		layers[i] = l
	}
	for step := 0; step < 40; step++ {
		// zero_grad(set_to_none=True)
		for _, l := range layers {
			if l.gw >= 0 {
				b.free(l.gw, l.gb)
				l.gw, l.gb = -1, -1
			}
		}
		x, y := b.alloc(batch*widths[0]*f32), b.alloc(batch*8)
		saved := []int64{x} // saved[i] = input of layer i
		for i, l := range layers {
			lin := b.alloc(batch * l.out * f32)
			if i == n-1 {
				saved = append(saved, lin)
				break
			}
			act := b.alloc(batch * l.out * f32) // relu output, saved by relu and the next linear
			b.free(lin)
			saved = append(saved, act)
		}
		probs, loss := b.alloc(batch*widths[n]*f32), b.alloc(f32)
		gOut := b.alloc(batch * widths[n] * f32)
		b.free(probs, loss, saved[n])
		for i := n - 1; i >= 0; i-- {
			l := layers[i]
			l.gw, l.gb = b.alloc(l.wSize), b.alloc(l.bSize)
			if i > 0 {
				gIn := b.alloc(batch * l.in * f32)
				b.free(gOut)
				gRelu := b.alloc(batch * l.in * f32)
				b.free(gIn)
				gOut = gRelu
			} else {
				b.free(gOut)
			}
			b.free(saved[i])
		}
		b.free(y)
		for _, l := range layers { // Adam
			if l.state == nil {
				l.state = []int64{b.alloc(l.wSize), b.alloc(l.wSize), b.alloc(l.bSize), b.alloc(l.bSize)}
			}
			for _, size := range []int64{l.wSize, l.bSize} {
				denom := b.alloc(size)
				upd := b.alloc(size)
				b.free(denom, upd)
			}
		}
		if step%10 == 9 {
			h := b.alloc(batch * widths[0] * f32)
			for _, l := range layers {
				next := b.alloc(batch * l.out * f32)
				b.free(h)
				h = next
			}
			b.free(h)
		}
	}
	for _, l := range layers {
		b.free(l.gw, l.gb)
		b.free(l.state...)
		b.free(l.w, l.b)
	}
}

// genSeqlen: a transformer trained in fp16 for 20 steps, each with its own sequence
// length, so activation and attention-score sizes differ every step.
func genSeqlen(b *builder) {
	r := b.r
	hidden := pick(r, int64(512), 768, 1024)
	heads := hidden / 64
	nLayers := int(r.between(4, 6))
	batch := pick(r, int64(2), 4, 8)
	maxSeq := min(1024, 4096/batch)
	vocab := int64(32000)

	var params []int64
	shapes := [][2]int64{{hidden, 3 * hidden}, {hidden, hidden}, {hidden, 4 * hidden}, {4 * hidden, hidden}}
	paramSizes := []int64{vocab * hidden * f16}
	for range nLayers {
		for _, s := range shapes {
			paramSizes = append(paramSizes, s[0]*s[1]*f16, s[1]*f16)
		}
		paramSizes = append(paramSizes, hidden*f16, hidden*f16, hidden*f16, hidden*f16) // two layer norms
	}
	for _, s := range paramSizes {
		params = append(params, b.alloc(s))
	}
	for range 20 {
		seq := r.between(16, maxSeq)
		tok := batch * seq
		ids := b.alloc(tok * 8)
		h := b.alloc(tok * hidden * f16)
		var saved [][]int64
		for range nLayers {
			ln := b.alloc(tok * hidden * f16)
			qkv := b.alloc(tok * 3 * hidden * f16)
			scores := b.alloc(batch * heads * seq * seq * f16)
			probs := b.alloc(batch * heads * seq * seq * f16)
			b.free(scores)
			ctx := b.alloc(tok * hidden * f16)
			attn := b.alloc(tok * hidden * f16)
			h2 := b.alloc(tok * hidden * f16)
			b.free(attn)
			ln2 := b.alloc(tok * hidden * f16)
			up := b.alloc(tok * 4 * hidden * f16)
			gelu := b.alloc(tok * 4 * hidden * f16)
			down := b.alloc(tok * hidden * f16)
			h3 := b.alloc(tok * hidden * f16)
			b.free(down)
			saved = append(saved, []int64{h, ln, qkv, probs, ctx, h2, ln2, up, gelu})
			h = h3
		}
		logits := b.alloc(tok * vocab * f16)
		loss := b.alloc(f32)
		gLogits := b.alloc(tok * vocab * f16)
		b.free(logits, loss, h)
		gH := b.alloc(tok * hidden * f16)
		b.free(gLogits)
		var grads []int64
		for i := nLayers - 1; i >= 0; i-- {
			for _, s := range shapes {
				grads = append(grads, b.alloc(s[0]*s[1]*f16), b.alloc(s[1]*f16))
			}
			gUp := b.alloc(tok * 4 * hidden * f16)
			gIn := b.alloc(tok * hidden * f16)
			b.free(gUp)
			gScores := b.alloc(batch * heads * seq * seq * f16)
			gQKV := b.alloc(tok * 3 * hidden * f16)
			b.free(gScores)
			gPrev := b.alloc(tok * hidden * f16)
			b.free(gQKV, gIn, gH)
			b.freeReverse(saved[i])
			gH = gPrev
		}
		b.free(gH, ids)
		grads = append(grads, b.alloc(vocab*hidden*f16))
		for _, g := range grads { // SGD with momentum-free update: one temporary per grad
			tmp := b.alloc(b.size[g])
			b.free(tmp)
		}
		b.freeShuffled(grads)
	}
	b.freeReverse(params)
}

// genEmptyCache: six epochs of training-like steps with a per-epoch batch size; the
// cache is emptied every third step and at every epoch's end, while persistent and
// pinned blocks keep some segments in use.
func genEmptyCache(b *builder) {
	r := b.r
	var model []int64
	for range 24 {
		model = append(model, b.alloc(r.logSize(4*kib, 64*mib)))
	}
	var pins []int64
	for epoch := range 6 {
		batch := pick(r, int64(16), 32, 48, 64, 96, 128)
		acts := make([]int64, 20)
		for i := range acts {
			acts[i] = r.logSize(16*kib, 2*mib) * batch / 16
		}
		for step := range 12 {
			var live []int64
			for _, size := range acts {
				live = append(live, b.alloc(size))
				if r.chance(1, 4) {
					tmp := b.alloc(r.logSize(512, 4*mib))
					b.free(tmp)
				}
			}
			if r.chance(1, 3) {
				pins = append(pins, b.alloc(r.logSize(512, 8*mib)))
			}
			b.freeReverse(live)
			if len(pins) > 4 {
				b.free(pins[0])
				pins = pins[1:]
			}
			if step%3 == 2 {
				b.emptyCache()
			}
		}
		if epoch%2 == 1 {
			i := r.intn(int64(len(model)))
			b.free(model[i])
			model[i] = b.alloc(r.logSize(4*kib, 64*mib))
		}
		b.emptyCache()
	}
	b.free(pins...)
	b.freeShuffled(model)
	b.emptyCache()
}
