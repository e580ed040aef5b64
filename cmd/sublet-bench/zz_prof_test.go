package main

import (
	"io"
	"testing"

	"github.com/subletml/sublet/device/named"
)

func BenchmarkZZTrain(b *testing.B) {
	dev, err := named.Open("cpu")
	if err != nil {
		b.Fatal(err)
	}
	cs, _ := pickTrainCases("tiny-sgd")
	bb := &bench{train: cs, steps: int64(b.N), out: io.Discard}
	b.ReportAllocs()
	b.ResetTimer()
	if _, err := trainOne(bb, dev, cs[0]); err != nil {
		b.Fatal(err)
	}
}
