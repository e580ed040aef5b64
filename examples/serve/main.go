// Command serve is an inference service with an out-of-memory guard, over net/http:
//
//   - POST /infer {"inputs": [[…], …]} answers {"classes": […], "pieces": n}. Each
//     forward is admitted by an estimate of its memory (fitted at start-up to two
//     forwards measured on the meta device), so that the forwards running at once stay
//     within a budget: a request waits for room, a request larger than the budget is
//     answered in pieces, and a piece that runs out of memory anyway is retried in
//     halves (degrading, not crashing). Only a single row that cannot run fails the
//     request, with 503 and Retry-After.
//   - GET /memory answers the allocator's figures and the service's counters.
//
// By default it serves on a loopback port and runs a bounded load test against itself
// (concurrent clients sending requests of random sizes, in rounds), then prints what
// was sent and answered and the memory after each round, and exits: every request
// answered, and the memory back to the parameters after every round. With -listen it
// serves until interrupted.
//
//	go run ./examples/serve                          # sim-backed, 64 MiB: a few seconds
//	go run ./examples/serve -capacity 4 -budget 8    # a budget the device cannot hold: OOMs caught
//	go run ./examples/serve -listen 127.0.0.1:8080   # then: curl localhost:8080/memory
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("serve", run(os.Args[1:], os.Stdout), os.Stderr)) }

const mib = 1 << 20

// config is what the flags set.
type config struct {
	device                    string
	capacityMiB, budgetMiB    int64
	sizes                     []int
	listen                    string
	clients, requests, rounds int
	maxRows                   int
	seed                      uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("serve", out)
	demo.DeviceFlag(fs, &c.device, "sim-backed")
	fs.Int64Var(&c.capacityMiB, "capacity", 64, "capacity of a simulated device in MiB")
	fs.Int64Var(&c.budgetMiB, "budget", 2, "memory the admitted forwards may take together, in MiB (0: half of what the device has free once the model is loaded)")
	sizes := fs.String("sizes", "64,256,256,10", "the MLP's layer widths: inputs, hidden..., classes")
	fs.StringVar(&c.listen, "listen", "", "serve on this address until interrupted instead of running the load test")
	fs.IntVar(&c.clients, "clients", 8, "concurrent clients of the load test")
	fs.IntVar(&c.requests, "requests", 10, "requests per client and round")
	fs.IntVar(&c.rounds, "rounds", 2, "rounds of the load test")
	fs.IntVar(&c.maxRows, "max-rows", 2048, "the load test's requests have 1 to this many rows")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the parameters and the load test's inputs")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	var err error
	if c.sizes, err = units.ParseLayerSizes("-sizes", *sizes); err != nil {
		return c, err
	}
	if c.capacityMiB < 0 || c.budgetMiB < 0 || c.clients < 1 || c.requests < 1 || c.rounds < 1 || c.maxRows < 1 {
		return c, errors.New("need -capacity, -budget ≥ 0 and -clients, -requests, -rounds, -max-rows ≥ 1")
	}
	return c, nil
}

// open opens the device: a simulated one has the flag's capacity. The service answers
// with the model's values, so the device must keep data.
func open(c config) (device.Device, *alloc.Allocator, error) {
	dev, a, hasData, err := demo.OpenWith(c.device, sim.Options{Capacity: c.capacityMiB * mib})
	if err == nil && !hasData {
		err = fmt.Errorf("-device %s keeps no data and a service answers with values: use sim-backed, cpu or cuda", c.device)
	}
	return dev, a, err
}

// run parses args, starts the service and serves, or load-tests it and reports.
func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	dev, a, err := open(c)
	if err != nil {
		return err
	}
	est, err := calibrate(c.sizes)
	if err != nil {
		return err
	}
	var model nn.Module
	if err := demo.Try(dev, func() error {
		model = nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(c.seed)}, nn.MLPConfig{Sizes: c.sizes})
		return nil
	}); err != nil {
		return err
	}
	defer model.Release()
	budget := c.budgetMiB * mib
	if budget == 0 {
		free, _, err := dev.MemInfo()
		if err != nil {
			return err
		}
		budget = free / 2
	}
	srv, err := newServer(dev, a, model, c.sizes, est, budget)
	if err != nil {
		return err
	}
	_, capacity, _ := dev.MemInfo()
	fmt.Fprintf(out, "sublet examples/serve on %s (%s): MLP %s, %s of parameters; a forward of n rows is estimated at %s + n × %s; budget %s, so at most %d rows a forward\n",
		dev.Name(), units.Bytes(capacity), units.JoinInts(c.sizes, "-"), units.Bytes(nn.ParameterBytes(model)), units.Bytes(est.fixed), units.Bytes(est.perRow), units.Bytes(budget), srv.maxRows)

	addr := c.listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	if c.listen != "" {
		fmt.Fprintf(out, "serving on http://%s (POST /infer, GET /memory); interrupt to stop\n", ln.Addr())
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		select {
		case <-ctx.Done():
		case err := <-served:
			return err
		}
	} else if err := loadTest(out, c, "http://"+ln.Addr().String(), srv); err != nil {
		hs.Close()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	model.Release()
	return demo.Drain(a)
}

// round is what one round of the load test saw.
type round struct {
	sent, answered, rows, split int
	// statuses counts the responses by HTTP status.
	statuses map[int]int
	// wrong counts answers whose classes do not match the rows sent (count, range).
	wrong int
	mem   memory
	took  time.Duration
}

// loadTest sends c.rounds rounds of requests to url and reports each; it fails if a
// request was lost or memory was left after a round.
func loadTest(out io.Writer, c config, url string, srv *server) error {
	fmt.Fprintf(out, "load test on %s: %d rounds of %d clients × %d requests of 1 to %d rows\n", url, c.rounds, c.clients, c.requests, c.maxRows)
	rows := [][]string{}
	var before memory
	for i := range c.rounds {
		r, err := sendRound(c, url, srv.features, srv.labels, uint64(i))
		if err != nil {
			return err
		}
		rows = append(rows, []string{fmt.Sprint(i + 1), fmt.Sprint(r.sent), fmt.Sprint(r.statuses[http.StatusOK]), fmt.Sprint(r.sent - r.answered),
			fmt.Sprint(r.split), fmt.Sprint(r.mem.OOMsCaught - before.OOMsCaught), fmt.Sprint(r.mem.Waits - before.Waits), units.Bytes(r.mem.Allocated), units.Bytes(r.mem.Reserved),
			units.Bytes(r.mem.PeakReserved), r.took.Round(time.Millisecond).String()})
		if lost := r.sent - r.statuses[http.StatusOK]; lost > 0 || r.wrong > 0 {
			return fmt.Errorf("round %d: %d of %d requests not answered with 200 (%v), %d answers wrong", i+1, lost, r.sent, r.statuses, r.wrong)
		}
		if r.mem.Requested-r.mem.Backend != r.mem.Parameters {
			return fmt.Errorf("round %d: %d bytes requested after it (%d of them the kernels'), not the parameters' %d", i+1, r.mem.Requested, r.mem.Backend, r.mem.Parameters)
		}
		before = r.mem
	}
	demo.Table(out, "  ", []string{"round", "sent", "200 OK", "lost", "in pieces", "OOMs caught", "forwards waited", "allocated after", "reserved after", "peak reserved", "time"}, rows)
	m := srv.memory()
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "every request answered; after each round only the parameters are allocated (%s)\nGET /memory: %s\n", units.Bytes(m.Parameters), js)
	return nil
}

// sendRound runs one round: c.clients goroutines each sending c.requests requests.
func sendRound(c config, url string, features, labels int, seq uint64) (round, error) {
	r := round{statuses: map[int]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	began := time.Now()
	for k := range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen := rand.New(rand.NewPCG(c.seed, seq<<32|uint64(k)))
			for range c.requests {
				n := 1 + gen.IntN(c.maxRows)
				status, resp, err := post(url, inputs(gen, n, features))
				mu.Lock()
				r.sent++
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					r.statuses[status]++
					if status == http.StatusOK {
						r.answered++
						r.rows += n
						if resp.Pieces > 1 {
							r.split++
						}
						if !valid(resp.Classes, n, labels) {
							r.wrong++
						}
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.took = time.Since(began)
	if firstErr != nil {
		return r, firstErr
	}
	var err error
	r.mem, err = getMemory(url)
	return r, err
}

// inputs draws n rows of standard normal features.
func inputs(gen *rand.Rand, n, features int) [][]float32 {
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, features)
		for j := range rows[i] {
			rows[i][j] = float32(gen.NormFloat64())
		}
	}
	return rows
}

func valid(classes []int64, n, labels int) bool {
	if len(classes) != n {
		return false
	}
	for _, k := range classes {
		if k < 0 || k >= int64(labels) {
			return false
		}
	}
	return true
}

// post sends one /infer request and decodes the answer.
func post(url string, rows [][]float32) (int, response, error) {
	body, err := json.Marshal(request{Inputs: rows})
	if err != nil {
		return 0, response{}, err
	}
	resp, err := http.Post(url+"/infer", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, response{}, err
	}
	defer resp.Body.Close()
	var r response
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return resp.StatusCode, r, fmt.Errorf("decoding the answer (status %d): %w", resp.StatusCode, err)
	}
	return resp.StatusCode, r, nil
}

func getMemory(url string) (memory, error) {
	resp, err := http.Get(url + "/memory")
	if err != nil {
		return memory{}, err
	}
	defer resp.Body.Close()
	var m memory
	return m, json.NewDecoder(resp.Body).Decode(&m)
}
