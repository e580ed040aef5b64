// Command metrics is a service whose device memory Prometheus can scrape: it serves
// inference-like requests on a simulated GPU (each takes activation buffers sized by
// its batch, then frees them), and exposes every device's allocator statistics on
// /metrics through package alloc/memmetrics, under PyTorch's stat names.
//
//	go run ./examples/metrics                       # 200 requests, then serve /metrics on 127.0.0.1:9464
//	curl -s 127.0.0.1:9464/metrics | grep '^sublet_'
//	go run ./examples/metrics -requests 0           # keep serving requests until stopped
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memmetrics"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/examples/internal/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, nil)
	stop()
	if errors.Is(err, context.Canceled) {
		err = nil // Ctrl-C ends the service
	}
	os.Exit(demo.Status("metrics", err, os.Stderr))
}

// run serves /metrics on -addr, handles -requests requests (forever for 0), prints a
// summary and serves until ctx ends. served, when not nil, is told the address once
// the requests are done.
func run(ctx context.Context, args []string, out io.Writer, served func(addr string)) (err error) {
	fs := demo.Flags("metrics", out)
	addr := fs.String("addr", "127.0.0.1:9464", "address to serve /metrics on (keep it on loopback unless you mean otherwise)")
	requests := fs.Int("requests", 200, "requests to serve before idling (0: serve requests until stopped)")
	capacity := fs.Int64("capacity", 8<<30, "the simulated GPU's memory in bytes")
	if err := demo.Parse(fs, args); err != nil {
		return err
	}
	if *capacity < 1 || *requests < 0 {
		return fmt.Errorf("need -capacity ≥ 1 and -requests ≥ 0")
	}
	d, err := sim.New(sim.Options{Capacity: *capacity})
	if err != nil {
		return err
	}
	a, err := alloc.For(d)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(memmetrics.NewCollector(func() []*alloc.Allocator { return []*alloc.Allocator{a} }))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Fprintf(out, "serving /metrics on http://%s/metrics\n", ln.Addr())

	weights, err := a.Alloc(512<<20, 0) // the model, resident for the service's life
	if err != nil {
		return err
	}
	// The end, whichever way: the weights freed and nothing left.
	defer func() { err = errors.Join(err, a.Free(weights), demo.Drain(a)) }()
	for i := 0; *requests == 0 || i < *requests; i++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := serve(a, i); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
	}
	m := demo.Read(a)
	fmt.Fprintf(out, "served %d requests: allocated %d bytes (the weights), reserved %d, peak reserved %d, %d segments, %d OOMs\n",
		*requests, m.Allocated, m.Reserved, m.PeakReserved, a.Stats().Segment[alloc.StatAll].Current, m.OOMs)
	if served != nil {
		served(ln.Addr().String())
	}
	<-ctx.Done()
	return ctx.Err()
}

// serve handles request i: a batch of 1 to 8 sequences takes an input, two activation
// buffers per layer of 4 and an output, all freed when the answer is ready.
func serve(a *alloc.Allocator, i int) error {
	batch := int64(1 + i*7%8)
	var live []device.Ptr
	defer func() {
		for _, p := range live {
			a.Free(p)
		}
	}()
	take := func(n int64) error {
		p, err := a.Alloc(n, 0)
		if err == nil {
			live = append(live, p)
		}
		return err
	}
	if err := take(batch * 256 << 10); err != nil {
		return err
	}
	for range 4 {
		if err := take(batch * 4 << 20); err != nil {
			return err
		}
		if err := take(batch * 1 << 20); err != nil {
			return err
		}
	}
	return take(batch * 64 << 10)
}
