//go:build linux

package onnx

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	ort "github.com/yalue/onnxruntime_go"
	"golang.org/x/sys/unix"
)

// benchCases are the models and inputs BenchmarkRun times.
var benchCases = []struct {
	name, file string
	in         []int64
}{
	{"model=cls", clsModel, []int64{1, 3, 48, 192}},
	{"model=rec", recModel, []int64{1, 3, 48, 320}},
}

// benchCalls returns two ways to run file's model on x: the backend
// (giving its outputs back with Recycle when recycle is set, as an engine
// that decodes them into its answer would), and the binding called
// directly with the same session options, reusing input and output
// tensors made once, so that the difference is all this package adds
// (checks, wrapping the input, output memory, the run's cancellation).
// Each fails b on an error.
func benchCalls(b *testing.B, file string, x engine.Tensor, recycle bool) (backend, binding func()) {
	s := open(b, file, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	out, err := s.Run(ctx, []engine.Tensor{x})
	if err != nil {
		b.Fatal(err)
	}
	direct, in, outT := directSession(b, s, x, out[0].Shape, Options{})
	backend = func() {
		out, err := s.Run(ctx, []engine.Tensor{x})
		if err != nil {
			b.Fatal(err)
		}
		if recycle {
			Recycle(out)
		}
	}
	binding = func() {
		if err := direct.Run([]ort.Value{in}, []ort.Value{outT}); err != nil {
			b.Fatal(err)
		}
	}
	return backend, binding
}

// BenchmarkRun times benchCalls' backend, keeping its outputs (kept) or
// recycling them (recycled), and binding, on the classifier and the
// recognizer. -count repeats a case in a row, so alternate the cases by
// running the test binary six times:
//
//	go test -c -o onnx.test ./internal/onnx
//	for i in 1 2 3 4 5 6; do ./onnx.test -test.run '^$' -test.bench 'BenchmarkRun$'; done | benchstat -col /call -
func BenchmarkRun(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			kept, binding := benchCalls(b, c.file, ramp(c.in), false)
			recycled, _ := benchCalls(b, c.file, ramp(c.in), true)
			for _, call := range []struct {
				name string
				f    func()
			}{{"backend-kept", kept}, {"backend-recycled", recycled}, {"binding", binding}} {
				b.Run("call="+call.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						call.f()
					}
				})
			}
		})
	}
}

// BenchmarkRunPaired makes BenchmarkRun's comparison call by call: each
// iteration calls the backend and the binding once each, which first
// turning from one iteration to the next (the second runs on the caches
// the first warmed), and reports each one's wall time, and the backend's
// ratio to the binding's in wall time (backend/binding) and in the CPU
// time of the calling thread (backend/binding-cpu: with one intra-op
// thread ONNX Runtime computes on the caller's thread, so this ratio holds
// when other processes take the cores). The backend's outputs are kept,
// or recycled (the two share the pool, so they are not mixed in one run):
//
//	go test -run '^$' -bench 'BenchmarkRunPaired' -count 6 ./internal/onnx | benchstat -col /outputs -
func BenchmarkRunPaired(b *testing.B) {
	for _, c := range benchCases {
		for _, recycle := range []bool{false, true} {
			name := c.name + "/outputs=kept"
			if recycle {
				name = c.name + "/outputs=recycled"
			}
			b.Run(name, func(b *testing.B) {
				backend, binding := benchCalls(b, c.file, ramp(c.in), recycle)
				calls := []func(){backend, binding}
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var wall, cpu [2]time.Duration
				turn := 0
				for b.Loop() {
					for k := range calls {
						i := (turn + k) % len(calls)
						t0, c0 := time.Now(), threadCPU(b)
						calls[i]()
						wall[i] += time.Since(t0)
						cpu[i] += threadCPU(b) - c0
					}
					turn++
				}
				b.ReportMetric(float64(wall[0].Nanoseconds())/float64(b.N), "backend-ns/op")
				b.ReportMetric(float64(wall[1].Nanoseconds())/float64(b.N), "binding-ns/op")
				b.ReportMetric(float64(wall[0])/float64(wall[1]), "backend/binding")
				b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "backend/binding-cpu")
			})
		}
	}
}

// threadCPU returns the CPU time the calling thread has used.
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// directSession opens s's model through the binding alone, with the
// session options opts gives, and makes its input tensor over x's
// elements and an output tensor of outShape; all are destroyed at the end
// of the benchmark.
func directSession(b *testing.B, s *Session, x engine.Tensor, outShape []int64, opts Options) (*ort.DynamicAdvancedSession, ort.Value, ort.Value) {
	so, err := opts.sessionOptions()
	if err != nil {
		b.Fatal(err)
	}
	defer so.Destroy()
	direct, err := ort.NewDynamicAdvancedSession(s.Path(), []string{s.Inputs()[0].Name}, []string{s.Outputs()[0].Name}, so)
	if err != nil {
		b.Fatal(err)
	}
	data, _ := x.Float32s()
	in, err := ort.NewTensor(ort.Shape(x.Shape), data)
	if err != nil {
		b.Fatal(err)
	}
	out, err := ort.NewEmptyTensor[float32](ort.Shape(outShape))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Destroy()
		out.Destroy()
		direct.Destroy()
	})
	return direct, in, out
}

// BenchmarkRecThreads runs the recognizer on one and on eight 48×320
// crops with one and with two intra-op threads, the second sleeping
// between parallel parts (the default) or spinning; ns/crop is the time
// per crop. Alternate the cases as for BenchmarkRun:
//
//	for i in 1 2 3 4 5 6; do ./onnx.test -test.run '^$' -test.bench 'BenchmarkRecThreads'; done | benchstat -col /intra -
func BenchmarkRecThreads(b *testing.B) {
	for _, batch := range []int64{1, 8} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			x := ramp([]int64{batch, 3, 48, 320})
			for _, opts := range []Options{{IntraOpThreads: 1}, {IntraOpThreads: 2}, {IntraOpThreads: 2, SpinWait: true}} {
				name := fmt.Sprintf("intra=%d", opts.IntraOpThreads)
				if opts.SpinWait {
					name += "-spin"
				}
				b.Run(name, func(b *testing.B) {
					s := open(b, recModel, opts)
					if _, err := s.Run(context.Background(), []engine.Tensor{x}); err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for b.Loop() {
						if _, err := s.Run(context.Background(), []engine.Tensor{x}); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*batch), "ns/crop")
				})
			}
		})
	}
}
