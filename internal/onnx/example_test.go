package onnx_test

import (
	"context"
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/onnx"
)

// An engine on top of the package: a session per replica opened in Warm,
// and one run for a batch of several requests' text-line crops of
// different widths, padded to the widest, whose outputs go back to each
// request and, once decoded, to the pool.
func Example() {
	// Warm: open the model with the stage's options (deploy: library,
	// intra_op_threads, graph_optimization...) and check the stage's
	// declaration against it.
	s, err := onnx.Open("/usr/local/share/omnistage/models/ppocr-v4/ch_PP-OCRv4_rec_infer.onnx", onnx.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	if err := s.Declare([]onnx.Spec{{Name: "x", Type: engine.Float32, Shape: []int64{-1, 3, 48, -1}}}, nil); err != nil {
		fmt.Println(err)
		return
	}

	// A batch: each request's crop (normalized to [-1, 1]) checked on its
	// own, so that a bad one fails alone, then one run for all.
	crops := []engine.Tensor{
		engine.Float32Tensor("x", []int64{1, 3, 48, 160}, make([]float32, 3*48*160)),
		engine.Float32Tensor("x", []int64{1, 3, 48, 320}, make([]float32, 3*48*320)),
	}
	for _, c := range crops {
		if err := s.CheckInputs([]engine.Tensor{c}); err != nil {
			fmt.Println(err) // an *engine.InputError: the request's 4xx
			return
		}
	}
	batch, err := onnx.Stack("x", crops, onnx.Pad{Dims: []int{3}})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := s.Run(context.Background(), []engine.Tensor{batch})
	onnx.Recycle([]engine.Tensor{batch})
	if err != nil {
		fmt.Println(err)
		return
	}
	perCrop, err := onnx.Split(out[0], onnx.Sizes(crops))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range perCrop {
		fmt.Println(p.Name, p.Shape) // softmax_11.tmp_0 [1 40 6625]: CTC-decode it
	}
	onnx.Recycle(out) // the parts are decoded: their memory may go back
}
