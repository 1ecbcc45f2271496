package ocrtest

// Tesseract 5 as a peer reader.

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Tesseract runs Debian's tesseract command (tesseract-ocr, with
// tesseract-ocr-eng and tesseract-ocr-chi-sim) on images, on one thread
// (OMP_THREAD_LIMIT=1).
type Tesseract struct {
	// Lang is its -l: "eng", "chi_sim", "eng+chi_sim".
	Lang string
	// PSM is its page segmentation mode: 3 (automatic, its default) or 1
	// (automatic, with orientation detection first).
	PSM int
}

// Result is what Tesseract read in one image and how long it took, its
// start (loading its model) included.
type Result struct {
	Text string
	// Elapsed is the wall time; CPU the processor time the process used
	// (user and system), which other work on the machine changes less.
	Elapsed, CPU time.Duration
}

// Available returns an error saying what to install when the tesseract
// command or t's languages are missing.
func (t Tesseract) Available(ctx context.Context) error {
	path, err := exec.LookPath("tesseract")
	if err != nil {
		return fmt.Errorf("tesseract: %w (install tesseract-ocr: scripts/install-deps.sh)", err)
	}
	out, err := exec.CommandContext(ctx, path, "--list-langs").Output()
	if err != nil {
		return fmt.Errorf("tesseract --list-langs: %w", err)
	}
	have := strings.Fields(string(out))
	for _, l := range strings.Split(t.Lang, "+") {
		found := false
		for _, h := range have {
			found = found || h == l
		}
		if !found {
			return fmt.Errorf("tesseract has no %s data (install tesseract-ocr-%s)", l, strings.ReplaceAll(l, "_", "-"))
		}
	}
	return nil
}

// Read runs tesseract on the image file img (PNG, JPEG, ...), given on
// its standard input, and returns the text it prints.
func (t Tesseract) Read(ctx context.Context, img []byte) (Result, error) {
	psm := t.PSM
	if psm == 0 {
		psm = 3
	}
	cmd := exec.CommandContext(ctx, "tesseract", "stdin", "stdout", "-l", t.Lang, "--psm", strconv.Itoa(psm))
	cmd.Env = append(os.Environ(), "OMP_THREAD_LIMIT=1")
	cmd.Stdin = bytes.NewReader(img)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		return Result{}, fmt.Errorf("tesseract: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	// A form feed ends each page.
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return Result{Text: strings.TrimRight(stdout.String(), "\f\n "), Elapsed: elapsed, CPU: cpu}, nil
}

// Startup returns the processor time Tesseract takes to read a blank
// 32×32 image, the median of three runs: mostly its start and its model's
// load, which a server that kept it loaded would pay once.
func (t Tesseract) Startup(ctx context.Context) (time.Duration, error) {
	var blank bytes.Buffer
	m := image.NewGray(image.Rect(0, 0, 32, 32))
	for i := range m.Pix {
		m.Pix[i] = 255
	}
	if err := png.Encode(&blank, m); err != nil {
		return 0, err
	}
	var runs []time.Duration
	for range 3 {
		res, err := t.Read(ctx, blank.Bytes())
		if err != nil {
			return 0, err
		}
		runs = append(runs, res.CPU)
	}
	slices.Sort(runs)
	return runs[1], nil
}
